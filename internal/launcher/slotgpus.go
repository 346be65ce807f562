package launcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// started notes that cell starts a server on the slot (by its GPUs), so a
// cell that finds the slot's GPUs still held after it can name it.
func (s *Sweep) started(slot string, cell matrix.Cell) {
	s.ranOn.Store(slot, cell.ID)
}

// heldSkip is the record of a cell not started because its slot's GPUs
// were still held (held, as nvidia-smi showed them) when the free timeout
// passed. It names the cell that ran last on the slot, whose record says
// what it left behind; with none, the memory is not this sweep's.
func (s *Sweep) heldSkip(cell matrix.Cell, slot, held string) record.Result {
	reason := fmt.Sprintf("not started: GPU memory still held after %s (%s)", s.Config.GPU.FreeTimeout, held)
	if prev, ok := s.ranOn.Load(slot); ok {
		reason += fmt.Sprintf("; left by %s, the cell that ran before on this slot: see its problems", prev)
	} else {
		reason += " before any cell of this sweep ran on this slot: something outside the sweep holds it"
	}
	now := time.Now().UTC()
	return record.Result{
		Cell: s.secrets().Cell(cell), Verdict: classify.Skipped, Slot: slot, Reason: reason,
		Observations: []evidence.Observation{}, Probes: []classify.ProbeVerdict{}, Started: now, Ended: now,
	}
}

// checkSlotGPUs refuses [[slot]]s that name a GPU this host does not show
// (visible: bmx's CUDA_VISIBLE_DEVICES, else nvidia-smi's indexes), before
// anything starts: a config written for a larger host would otherwise start
// servers on GPUs CUDA cannot see, each a crash that says nothing of the
// backend. With no visible GPUs known, or GPUs named other than by index,
// there is nothing to compare with.
func checkSlotGPUs(slots []matrix.Slot, visible []string) error {
	if len(visible) == 0 || slices.ContainsFunc(visible, func(g string) bool { _, err := strconv.Atoi(g); return err != nil }) {
		return nil
	}
	for i, sl := range slots {
		for _, g := range strings.Split(sl.GPUs, ",") {
			if g != "" && !slices.Contains(visible, g) {
				return fmt.Errorf("slot #%d (gpus = %q) names GPU %s, but this host shows GPUs %s: write the [[slot]]s for this host, or use --slots N",
					i+1, sl.GPUs, g, strings.Join(visible, ","))
			}
		}
	}
	return nil
}
