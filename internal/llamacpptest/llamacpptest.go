// Package llamacpptest holds what the tests of the llama.cpp example
// (examples/llamacpp: llama.cpp on CPU through node-llama-cpp, with the
// real model stories260K.gguf) share: whether the engine can run here, and
// what each cell's verdict, numerics and performance must be, given what
// the engine does with each cache type. internal/record's
// TestLlamaCppRecorded checks a recorded sweep of the whole example with
// it, cmd/bmx's TestLlamaCppSweep a live sweep of a part of it.
package llamacpptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// Ready returns the example's directory and the model's path, or skips
// (fails in CI, where .ci/run installs node's dependencies) when node, the
// example's node dependencies or the model are missing.
func Ready(t testing.TB) (dir, model string) {
	t.Helper()
	dir = filepath.Join(testenv.Root(), "examples", "llamacpp")
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, "the real-engine test needs node: it is not installed")
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-llama-cpp")); err != nil {
		testenv.Skip(t, "the real-engine test needs the example's node dependencies: not installed (cd examples/llamacpp && npm ci --omit=optional)")
	}
	model = testenv.Shared(t, "models", "stories260K.gguf")
	return dir, model
}

// CheckCells checks every cell's verdict against what the engine
// does (crashes for the quantized caches it refuses, garbage for a
// quantized K cache without flash attention, correct otherwise, with
// positive evidence), its numerics against the yardstick ref, and that
// the correct cells, and only they, were measured.
func CheckCells(t testing.TB, cells []record.Result, ref string) {
	t.Helper()
	CheckCellsPerf(t, cells, ref, ExamplePerf)
}

// Perf is what a correct cell's performance measurement must hold: how
// many requests at each level, of how many tokens out.
type Perf struct{ Requests, OutputTokens int }

// ExamplePerf is the example's [perf] as shipped (probes.toml).
var ExamplePerf = Perf{Requests: 4, OutputTokens: 128}

// CheckCellsPerf is CheckCells for a sweep whose [perf] asked for perf's
// requests and tokens out rather than the example's.
func CheckCellsPerf(t testing.TB, cells []record.Result, ref string, perf Perf) {
	t.Helper()
	for _, c := range cells {
		fa, _ := c.Cell.Value("flash_attn")
		k, _ := c.Cell.Value("cache_k")
		v, _ := c.Cell.Value("cache_v")
		quantK, quantV := strings.HasPrefix(k, "q"), strings.HasPrefix(v, "q")
		var want classify.Verdict
		var sig string
		switch {
		case quantV && fa == "off":
			want, sig = classify.Crash, "quantized V cache requires flash_attn to be enabled"
		case quantK && fa == "on":
			want, sig = classify.Crash, "K cache type "+k+" with block size 32 does not divide n_embd_head_k=8"
		case quantV && fa == "on":
			want, sig = classify.Crash, "V cache type "+v+" with block size 32 does not divide n_embd_head_v=8"
		case quantK:
			want = classify.Garbage
		default:
			want = classify.Correct
		}
		if c.Verdict != want || !strings.Contains(c.Signature, sig) {
			t.Errorf("%s: %s %q (%s), want %s %q", c.Cell.ID, c.Verdict, c.Signature, c.Reason, want, sig)
		}
		if want == classify.Correct && (c.ShapeOnly || len(c.VouchedBy) == 0) {
			t.Errorf("%s: correct without agreeing cells to vouch for it (shape only %v): %s", c.Cell.ID, c.ShapeOnly, c.Reason)
		}
		if want == classify.Garbage && c.Cell.ID != ref && !strings.Contains(c.Reason, "the reference cell "+ref+" answered") {
			t.Errorf("%s: the garbage is not set against the yardstick %s: %s", c.Cell.ID, ref, c.Reason)
		}
		checkNumerics(t, c, want, ref)
		checkPerf(t, c, want, perf)
	}
}

// checkPerf: a correct cell was measured with the [perf] of want (alone
// and 2 at a time, want.OutputTokens out by the engine's own count, real tokens/s,
// the prompt about as long as asked by the engine's count, each request
// cut at its length with a gap measured between most of its tokens);
// a cell that crashed or answered garbage was not.
func checkPerf(t testing.TB, c record.Result, want classify.Verdict, perf Perf) {
	t.Helper()
	p := c.Perf
	if want != classify.Correct {
		if p != nil {
			t.Errorf("%s (%s) was measured: %+v", c.Cell.ID, want, p.Levels)
		}
		return
	}
	if p == nil || len(p.Levels) != 2 || len(p.Problems) > 0 || !p.IgnoreEOS {
		t.Errorf("%s: perf %+v", c.Cell.ID, p)
		return
	}
	if p.PromptTokensSeen < p.PromptTokens*3/4 || p.PromptTokensSeen > p.PromptTokens*5/4 {
		t.Errorf("%s: a prompt of %d tokens by the engine's count, %d asked", c.Cell.ID, p.PromptTokensSeen, p.PromptTokens)
	}
	for _, l := range p.Levels {
		if l.Requests != perf.Requests || l.Failed > 0 || l.Short > 0 || l.TokensPerSecond.Min <= 0 || l.TTFTMS.Min <= 0 {
			t.Errorf("%s at concurrency %d: %d requests, %d failed, %d short, %+v tok/s", c.Cell.ID, l.Concurrency, l.Requests, l.Failed, l.Short, l.TokensPerSecond)
		}
		for _, r := range l.Runs {
			if r.OutputTokens != perf.OutputTokens || !r.Usage {
				t.Errorf("%s: a request of %d tokens (usage %v), want %d by the engine's count", c.Cell.ID, r.OutputTokens, r.Usage, perf.OutputTokens)
			}
			if !r.OK() || r.FinishReason != "length" || len(r.ITLUS) < perf.OutputTokens/2 {
				t.Errorf("%s at concurrency %d: a request that failed (%v), ended %q or measured %d gaps of %d tokens", c.Cell.ID, l.Concurrency, !r.OK(), r.FinishReason, len(r.ITLUS), r.OutputTokens)
			}
		}
	}
	t.Logf("%-40s %.0f tok/s per request alone, %.0f in total at 2", c.Cell.ID, p.Levels[0].TokensPerSecond.Median, p.Levels[1].TotalTokensPerSecond)
}

// checkNumerics: a cell that answered has numerics against the reference
// (the reference itself has none); a healthy cell's divergence is far below
// the degraded threshold (margin: at least 10 times), a garbage cell's above
// it.
func checkNumerics(t testing.TB, c record.Result, want classify.Verdict, ref string) {
	t.Helper()
	n := c.Numerics
	switch {
	case c.Cell.ID == ref:
		if n != nil {
			t.Errorf("%s: the reference is compared with itself", c.Cell.ID)
		}
		return
	case want == classify.Crash:
		if n != nil {
			t.Errorf("%s: numerics without answers: %+v", c.Cell.ID, n)
		}
		return
	case n == nil || len(n.Probes) != 3 || n.Compared == 0:
		t.Errorf("%s: numerics %+v, want the 3 story probes compared", c.Cell.ID, n)
		return
	}
	first := "-"
	if n.FirstDiff != nil {
		first = fmt.Sprint(*n.FirstDiff)
	}
	t.Logf("%-40s %-8s KL %.3g nats/token over %3d tokens, first diff %s, max %.3g", c.Cell.ID, c.Verdict, n.KL, n.Compared, first, n.MaxKL)
	switch {
	case want == classify.Correct && n.KL*10 >= classify.DegradedKL:
		t.Errorf("%s: a healthy cache type diverges by %.3g nats/token, within 10x of the %g threshold", c.Cell.ID, n.KL, classify.DegradedKL)
	case want == classify.Garbage && n.KL <= classify.DegradedKL:
		t.Errorf("%s: a garbage cell diverges by only %.3g nats/token (threshold %g)", c.Cell.ID, n.KL, classify.DegradedKL)
	}
}
