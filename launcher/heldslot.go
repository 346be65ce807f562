package launcher

import (
	"fmt"
	"time"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/evidence"
	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/record"
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
		Cell: s.Config.RedactCell(cell), Verdict: classify.Skipped, Slot: slot, Reason: reason,
		Observations: []evidence.Observation{}, Probes: []classify.ProbeVerdict{}, Started: now, Ended: now,
	}
}
