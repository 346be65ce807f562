package server

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

	"github.com/bmx-dev/bmx/internal/matrix"
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

// GPUs checks the memory of a slot's GPUs through nvidia-smi, so that a
// server does not start on GPUs the last one still holds and the one that
// left them held is named; a nil *GPUs checks nothing (no nvidia-smi on
// this host).
type GPUs struct {
	cfg matrix.GPU
}

// ErrNoSMI means the configured nvidia-smi is not on this host.
var ErrNoSMI = errors.New("nvidia-smi not found: GPU memory is not checked between cells")

// NewGPUs returns nil and ErrNoSMI when the configured nvidia-smi is
// absent.
func NewGPUs(cfg matrix.GPU) (*GPUs, error) {
	if _, err := exec.LookPath(cfg.SMI[0]); err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoSMI, cfg.SMI[0])
	}
	return &GPUs{cfg: cfg}, nil
}

func (g *GPUs) query(ctx context.Context) ([]GPUMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	args := append(slices.Clone(g.cfg.SMI[1:]), "--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
	out, err := exec.CommandContext(ctx, g.cfg.SMI[0], args...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(g.cfg.SMI, " "), err)
	}
	return ParseGPUMemory(out)
}

// held lists the GPUs of the slot (all, for "") above the threshold. A
// slot entry that is not an nvidia-smi index (a GPU UUID or a MIG device
// from bmx's own CUDA_VISIBLE_DEVICES, split by --slots) is an error: its
// memory cannot be told from the other GPUs'.
func (g *GPUs) held(gpus []GPUMemory, slot string) ([]GPUMemory, error) {
	var want []int
	if slot != "" {
		for _, s := range strings.Split(slot, ",") {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("slot GPU %q is not an nvidia-smi index: the slot's GPU memory is not checked", s)
			}
			want = append(want, n)
		}
	}
	var out []GPUMemory
	for _, m := range gpus {
		if (want == nil || slices.Contains(want, m.Index)) && m.UsedMiB > g.cfg.BusyMiB {
			out = append(out, m)
		}
	}
	return out, nil
}

// WaitFree polls until the slot's GPUs are below the threshold or the free
// timeout passes. It returns the GPUs held at the first look (memory that
// outlived the server's processes; "" when free at once) and those still
// held at the end ("" when free).
func (g *GPUs) WaitFree(ctx context.Context, slot string) (first, still string, err error) {
	if g == nil {
		return "", "", nil
	}
	deadline := time.Now().Add(g.cfg.FreeTimeout)
	for {
		gpus, err := g.query(ctx)
		if err != nil {
			return first, "", err
		}
		held, err := g.held(gpus, slot)
		if err != nil {
			return first, "", err
		}
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

// Released waits, after a server's teardown, until the slot's GPU memory
// is released (or the free timeout passes), and says what it found: memory
// still held at the end, or held when the server's processes were already
// gone. A failing nvidia-smi says nothing here; the next cell's wait notes
// it.
func (g *GPUs) Released(ctx context.Context, slot string) []string {
	t0 := time.Now()
	first, held, err := g.WaitFree(ctx, slot)
	switch {
	case err == nil && held != "":
		return []string{fmt.Sprintf("GPU memory still held %s after teardown: %s", g.cfg.FreeTimeout, held)}
	case err == nil && first != "":
		return []string{fmt.Sprintf("GPU memory was still held when the server's processes were gone (%s); free after %s, before the next cell started",
			first, time.Since(t0).Round(time.Millisecond))}
	}
	return nil
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
func (g *GPUs) smiSnapshot(ctx context.Context) string {
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
	g, err := NewGPUs(cfg)
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
