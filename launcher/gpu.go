package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/matrix"
)

// nvidia-smi timing.
const (
	// smiTimeout bounds one nvidia-smi call: it answers in well under a
	// second unless the driver is wedged, and then bmx must not wedge too.
	smiTimeout = 30 * time.Second
	// gpuFreePoll is how often a slot's GPU memory is checked while bmx
	// waits for it to be released: the driver frees it within a second of
	// the process's death, and each nvidia-smi call costs some 50 ms.
	gpuFreePoll = 500 * time.Millisecond
)

// GPUMemory is one GPU's memory use as nvidia-smi reports it.
type GPUMemory struct {
	Index   int
	UsedMiB int
}

// ParseGPUMemory parses the output of
// `nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`.
func ParseGPUMemory(out []byte) ([]GPUMemory, error) {
	var gpus []GPUMemory
	for n, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 2 {
			return nil, fmt.Errorf("nvidia-smi line %d: want \"index, memory.used\", got %q", n+1, line)
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		used, err2 := strconv.Atoi(strings.TrimSpace(f[1]))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: not numbers: %q", n+1, line)
		}
		gpus = append(gpus, GPUMemory{Index: idx, UsedMiB: used})
	}
	return gpus, nil
}

// gpuCheck waits for a slot's GPUs to be free; a nil *gpuCheck does nothing
// (no nvidia-smi on this host).
type gpuCheck struct {
	cfg matrix.GPU
}

// ErrNoSMI means the configured nvidia-smi is not on this host.
var ErrNoSMI = errors.New("nvidia-smi not found: GPU memory is not checked between cells")

// newGPUCheck returns nil and ErrNoSMI when the command is absent.
func newGPUCheck(cfg matrix.GPU) (*gpuCheck, error) {
	if _, err := exec.LookPath(cfg.SMI[0]); err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoSMI, cfg.SMI[0])
	}
	return &gpuCheck{cfg: cfg}, nil
}

func (g *gpuCheck) query(ctx context.Context) ([]GPUMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	args := append(slices.Clone(g.cfg.SMI[1:]), "--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
	out, err := exec.CommandContext(ctx, g.cfg.SMI[0], args...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(g.cfg.SMI, " "), err)
	}
	return ParseGPUMemory(out)
}

// held lists the GPUs of the slot (all, for "") above the threshold.
func (g *gpuCheck) held(gpus []GPUMemory, slot string) []GPUMemory {
	var want []int
	if slot != "" {
		for _, s := range strings.Split(slot, ",") {
			n, _ := strconv.Atoi(s)
			want = append(want, n)
		}
	}
	var out []GPUMemory
	for _, m := range gpus {
		if (want == nil || slices.Contains(want, m.Index)) && m.UsedMiB > g.cfg.BusyMiB {
			out = append(out, m)
		}
	}
	return out
}

// waitFree polls until the slot's GPUs are below the threshold or the free
// timeout passes. It returns the GPUs held at the first look (memory that
// outlived the server's processes; "" when free at once) and those still
// held at the end ("" when free).
func (g *gpuCheck) waitFree(ctx context.Context, slot string) (first, still string, err error) {
	if g == nil {
		return "", "", nil
	}
	deadline := time.Now().Add(g.cfg.FreeTimeout)
	for {
		gpus, err := g.query(ctx)
		if err != nil {
			return first, "", err
		}
		held := g.held(gpus, slot)
		if len(held) == 0 {
			return first, "", nil
		}
		if first == "" {
			first = describeHeld(held)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return first, describeHeld(held), nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(gpuFreePoll):
		}
	}
}

// describeHeld is "GPU 0: 8811 MiB, GPU 1: 900 MiB".
func describeHeld(held []GPUMemory) string {
	parts := make([]string, 0, len(held))
	for _, m := range held {
		parts = append(parts, fmt.Sprintf("GPU %d: %d MiB", m.Index, m.UsedMiB))
	}
	return strings.Join(parts, ", ")
}

// smiSnapshot is nvidia-smi's full report, for hang forensics.
func (g *gpuCheck) smiSnapshot(ctx context.Context) string {
	if g == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, g.cfg.SMI[0], g.cfg.SMI[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	return out.String()
}

// VisibleGPUs lists the GPU indexes of this host: CUDA_VISIBLE_DEVICES if set,
// else what nvidia-smi reports; nil when neither says.
func VisibleGPUs(ctx context.Context, cfg matrix.GPU, cudaVisible string) []string {
	if cudaVisible != "" {
		return strings.Split(strings.ReplaceAll(cudaVisible, " ", ""), ",")
	}
	g, err := newGPUCheck(cfg)
	if err != nil {
		return nil
	}
	gpus, err := g.query(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range gpus {
		out = append(out, strconv.Itoa(m.Index))
	}
	return out
}

// SplitSlots divides gpus into n slots of equal size (the remainder unused).
// With no known GPUs it returns n slots that share the host's GPUs, as a sim
// or CPU engine needs.
func SplitSlots(gpus []string, n int) ([]matrix.Slot, error) {
	if n < 1 {
		return nil, fmt.Errorf("--slots %d: want at least 1", n)
	}
	if len(gpus) == 0 {
		return make([]matrix.Slot, n), nil
	}
	if n > len(gpus) {
		return nil, fmt.Errorf("--slots %d: only %d GPUs are visible (%s)", n, len(gpus), strings.Join(gpus, ","))
	}
	size := len(gpus) / n
	slots := make([]matrix.Slot, n)
	for i := range slots {
		slots[i].GPUs = strings.Join(gpus[i*size:(i+1)*size], ",")
	}
	return slots, nil
}
