package main

import (
	"encoding/json"
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

// llamacppReady returns the example server's directory, or skips (fails in
// CI, where .ci/run installs node's dependencies) when node or the
// dependencies or the model are missing.
func llamacppReady(t *testing.T) (dir, model string) {
	t.Helper()
	dir, _ = filepath.Abs(filepath.Join("..", "..", "examples", "llamacpp"))
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, "the real-engine test needs node: it is not installed")
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-llama-cpp")); err != nil {
		testenv.Skip(t, "the real-engine test needs the example's node dependencies: not installed (cd examples/llamacpp && npm ci --omit=optional)")
	}
	model = testenv.Shared(t, "models", "stories260K.gguf")
	return dir, model
}

// TestLlamaCppSweep sweeps a real inference engine (llama.cpp on CPU through
// node-llama-cpp) with a real trained model, and checks each verdict against
// what the engine really does. It is also the calibration of the degraded
// threshold: every cell that answers is compared with the f16 reference by
// its greedy top-5 logprobs, and the healthy cache types (f32, f16, bf16,
// flash attention on or off) must sit far below classify.DegradedKL while
// the quantized-K cells that produce garbage sit above it. Judged again with
// a garbage cell (a q8_0 K cache without flash attention) configured as the
// reference: the healthy cells must still be correct, the agreeing cells
// are the yardstick, and the report says the reference failed.
func TestLlamaCppSweep(t *testing.T) {
	t.Parallel()
	dir, model := llamacppReady(t)
	const shipped = "flash_attn=off,cache_k=f16,cache_v=f16"
	var shippedRun string
	out := t.TempDir() // the shipped run outlives its subtest: the next one judges it again
	t.Run("as shipped", func(t *testing.T) {
		rep, stdout, run := llamacppSweep(t, filepath.Join(dir, "matrix.toml"), model, out)
		shippedRun = run
		if rep.Run.Reference != shipped || rep.Agreement == nil || rep.Agreement.Yardstick != shipped || rep.Agreement.Status != classify.RefConfirmed {
			t.Errorf("reference %q, agreement %+v: want the shipped reference, vouched for", rep.Run.Reference, rep.Agreement)
		}
		checkLlamaCppCells(t, rep, shipped)
		// The sweep's output has the performance table of the correct cells
		// and either crowns one or says they are within noise.
		if !strings.Contains(stdout, "performance: streamed chat completions, 64-token prompt, 128 tokens out") ||
			!strings.Contains(stdout, "fastest correct cell") && !strings.Contains(stdout, "within noise") {
			t.Errorf("no performance section or recommendation:\n%s", stdout)
		}
	})
	// The same engine outputs, with the garbage cell named as the reference:
	// every cell is judged again from its recorded evidence (bmx report
	// --rejudge), so the real outputs are judged against a real garbage
	// reference without sweeping the engine a second time.
	t.Run("garbage reference", func(t *testing.T) {
		if shippedRun == "" {
			t.Fatal("the shipped sweep left no run to judge again")
		}
		const garbage = "flash_attn=off,cache_k=q8_0,cache_v=f16"
		run := filepath.Join(t.TempDir(), filepath.Base(shippedRun))
		if err := os.CopyFS(run, os.DirFS(shippedRun)); err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal(mustRead(t, filepath.Join(run, "run.json")), &meta); err != nil {
			t.Fatal(err)
		}
		meta["reference"] = garbage
		b, err := json.Marshal(meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, "run.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := bmx(t, "report", run, "--rejudge", "--format", "json")
		if code != ExitOK {
			t.Fatalf("report --rejudge: exit %d\n%s", code, stderr)
		}
		var rep llamaReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		a := rep.Agreement
		if rep.Run.Reference != garbage || a == nil || a.Status != classify.RefBroken || a.Yardstick == garbage || a.Yardstick == "" {
			t.Fatalf("reference %q, agreement %+v: want the garbage reference replaced by the agreeing cells", rep.Run.Reference, a)
		}
		if _, table, _ := bmx(t, "report", run, "--rejudge"); !strings.Contains(table, "failed, so it is no yardstick") {
			t.Errorf("the report does not say the reference failed:\n%s", table)
		}
		checkLlamaCppCells(t, rep, a.Yardstick)
	})
}

// llamaReport is what the llama.cpp tests read of a sweep's report.json.
type llamaReport struct {
	Run       record.Run          `json:"run"`
	Cells     []record.Result     `json:"cells"`
	Agreement *classify.Agreement `json:"agreement"`
}

// llamacppSweep sweeps config with 2 slots and returns its report.json, the
// sweep's stdout and the run directory (made under out).
func llamacppSweep(t *testing.T, config, model, out string) (llamaReport, string, string) {
	t.Helper()
	code, stdout, stderr := bmx(t, "sweep", "-c", config, "--var", "model="+model, "--slots", "2", "--out", out, "-q")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	run := runDir(t, out)
	var rep llamaReport
	if err := json.Unmarshal(mustRead(t, filepath.Join(run, "report.json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 20 {
		t.Fatalf("%d cells", len(rep.Cells))
	}
	return rep, stdout, run
}

// checkLlamaCppCells checks every cell's verdict against what the engine
// does (crashes for the quantized caches it refuses, garbage for a quantized
// K cache without flash attention, correct otherwise, with positive
// evidence), and its numerics against the yardstick ref.
func checkLlamaCppCells(t *testing.T, rep llamaReport, ref string) {
	t.Helper()
	for _, c := range rep.Cells {
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
		checkPerf(t, c, want)
	}
}

// checkPerf: a correct cell was measured with the example's [perf] (alone
// and 2 at a time, 128 tokens out by the engine's own count, real tokens/s);
// a cell that crashed or answered garbage was not.
func checkPerf(t *testing.T, c record.Result, want classify.Verdict) {
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
	for _, l := range p.Levels {
		if l.Requests != 4 || l.Failed > 0 || l.Short > 0 || l.TokensPerSecond.Min <= 0 || l.TTFTMS.Min <= 0 {
			t.Errorf("%s at concurrency %d: %d requests, %d failed, %d short, %+v tok/s", c.Cell.ID, l.Concurrency, l.Requests, l.Failed, l.Short, l.TokensPerSecond)
		}
		for _, r := range l.Runs {
			if r.OutputTokens != 128 || !r.Usage {
				t.Errorf("%s: a request of %d tokens (usage %v), want 128 by the engine's count", c.Cell.ID, r.OutputTokens, r.Usage)
			}
		}
	}
	t.Logf("%-40s %.0f tok/s per request alone, %.0f in total at 2", c.Cell.ID, p.Levels[0].TokensPerSecond.Median, p.Levels[1].TotalTokensPerSecond)
}

// checkNumerics: a cell that answered has numerics against the reference
// (the reference itself has none); a healthy cell's divergence is far below
// the degraded threshold (margin: at least 10 times), a garbage cell's above
// it.
func checkNumerics(t *testing.T, c record.Result, want classify.Verdict, ref string) {
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

func TestLlamaCppServerFlags(t *testing.T) {
	t.Parallel()
	dir, _ := llamacppReady(t)
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), "-m", "x.gguf", "--n-gpu-layers", "99")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "usage: server.mjs") || !strings.Contains(string(out), "invalid argument: --n-gpu-layers") {
		t.Errorf("err %v\n%s", err, out)
	}
}
