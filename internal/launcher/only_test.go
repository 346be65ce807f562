//go:build linux

package launcher

import (
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestOnlyRunsTheReference: --only of the simulated host's degraded cell
// (its numerics part from the reference's) without the reference cell runs
// the reference as well and records it, so the cell is still degraded, not
// correct for want of anything to compare it with.
func TestOnlyRunsTheReference(t *testing.T) {
	t.Parallel()
	const ref, degraded = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
	// Two greedy probes with logprobs, the smoke set's first two, and no
	// perf: the degraded cell drifts from the reference only in its
	// logprobs, which these carry.
	config := writeConfig(t, matrixtest.Config{Name: "only",
		Head:   `reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`,
		Server: simServer(), Axes: sm120Axes(), Tail: "[probes]\nfile = \"probes.toml\"\n"})
	matrixtest.WriteFile(t, filepath.Join(filepath.Dir(config), "probes.toml"), matrixtest.GreedyProbes+"\n[perf]\nenabled = false\n")
	s := newTestSession(t, config)
	s.Only = []string{degraded}
	out := s.mustRun(t)
	got := map[string]classify.Verdict{}
	for _, r := range readResults(t, out.Dir) {
		got[r.Cell.ID] = r.Verdict
	}
	if len(got) != 2 || got[ref] != classify.Correct || got[degraded] != classify.Degraded {
		t.Errorf("recorded %v; want the reference correct and %s degraded", got, degraded)
	}
	if out.Report.Run.Reference != ref {
		t.Errorf("run.json reference %q, want %q", out.Report.Run.Reference, ref)
	}
}
