package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// forcedProbes are greedy probes with top-k logprobs and expectations, so
// verdicts do not hang on agreement: one about a topic, where the sim's
// model has its near tie, a sampled one, which is never forced, and a
// thinking one, whose answer is not forced either.
const forcedProbes = `[[probe]]
name = "sea"
prompt = "Write two sentences about the sea."
max_tokens = 64
logprobs = true
expect = { contains = "sea" }

[[probe]]
name = "math"
prompt = "What is 300+23?"
max_tokens = 32
logprobs = true
expect = { number = 323 }

[[probe]]
name = "sampled"
prompt = "Write two sentences about the sea."
max_tokens = 64
temperature = 0.8
expect = { contains = "sea" }

[[probe]]
name = "thinking"
prompt = "What is 300+23?"
max_tokens = 256
thinking = true
expect = { number = 323 }
`

// TestSweepScoresOnTheReferencesTokens: a sweep through real bmx and
// sim-server processes, the reference first: every other cell's greedy
// probes carry in results.jsonl the cell's teacher-forced scoring of the
// reference's answer (SGLang's /v1/tokenize and /generate, the method
// recorded), and the cell's numerics are compared on it over every token
// of the reference's answer. A cell that flips the model's near tie is
// within the floor over the whole answer and correct; a drifting one is
// degraded on the forced figures; garbage scores the reference's tokens
// as unlikely; the reference itself, the sampled and the thinking probe
// are not scored.
func TestSweepScoresOnTheReferencesTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	matrixtest.Profile{Name: "forced", Startup: "20ms", Body: `[[rule]]
when = { moe_runner_backend = "triton", fp4_gemm_backend = "flashinfer_cudnn" }
behaviour = "drift"

[[rule]]
when = { moe_runner_backend = "triton", fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "tie"

[[rule]]
when = { moe_runner_backend = "flashinfer_cutlass", fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "garbage"
`}.Write(t, filepath.Join(dir, "profile.toml"))
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), forcedProbes)
	matrixtest.Config{Name: "forced", Head: `reference = { moe = "flashinfer_cutlass", fp4 = "flashinfer_cudnn" }`,
		Server: matrixtest.Server{Command: matrixtest.Sim("--sim-profile", "{dir}/profile.toml", "--reasoning-parser", "qwen3"), ReadyTimeout: "30s"},
		Axes: []matrixtest.Axis{
			{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "triton"}},
			{Name: "fp4", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		},
		Tail: "[probes]\nfile = \"probes.toml\"\n",
	}.Write(t, filepath.Join(dir, "forced.toml"))
	out := filepath.Join(dir, "runs")
	code, stdout, stderr := runBMX(t, "sweep", "-c", filepath.Join(dir, "forced.toml"), "--out", out, "--slots", "2")
	if code != ExitOK {
		t.Fatalf("sweep: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	f, err := os.Open(filepath.Join(runDir(t, out), "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cells := map[string]record.Result{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r record.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		cells[r.Cell.ID] = r
	}
	const ref = "moe=flashinfer_cutlass,fp4=flashinfer_cudnn"
	want := map[string]classify.Verdict{
		ref:                                 classify.Correct,
		"moe=triton,fp4=flashinfer_cudnn":   classify.Degraded,
		"moe=triton,fp4=flashinfer_cutlass": classify.Correct,
		"moe=flashinfer_cutlass,fp4=flashinfer_cutlass": classify.Garbage,
	}
	if len(cells) != len(want) {
		t.Fatalf("results.jsonl has %d cells, want %d\n%s", len(cells), len(want), stdout)
	}
	refAnswer := map[string]int{}
	for _, o := range cells[ref].Observations {
		if o.Forced != nil {
			t.Errorf("the reference scored its own answer to %s: %+v", o.Probe, o.Forced)
		}
		if o.Logprobs != nil && len(o.Logprobs.Steps) > 0 {
			refAnswer[o.Probe] = len(o.Logprobs.Steps)
		}
	}
	if len(refAnswer) != 2 {
		t.Fatalf("the reference's greedy answers with logprobs: %v, want sea and math", refAnswer)
	}
	for id, v := range want {
		r := cells[id]
		if r.Verdict != v {
			t.Errorf("%s: %s (%s), want %s", id, r.Verdict, r.Reason, v)
		}
		if id == ref {
			continue
		}
		for _, o := range r.Observations {
			switch {
			case o.Probe == "sampled" || o.Probe == "thinking":
				if o.Forced != nil {
					t.Errorf("%s %s: scored %+v", id, o.Probe, o.Forced)
				}
			case o.Forced == nil || o.Forced.Against != ref || o.Forced.Method != probe.ForceSGLang || o.Forced.Err != "" || len(o.Forced.Steps) != refAnswer[o.Probe]:
				t.Errorf("%s %s: forced %+v, want the reference's %d tokens scored by %s", id, o.Probe, o.Forced, refAnswer[o.Probe], probe.ForceSGLang)
			}
		}
		n := r.Numerics
		if n == nil || n.Reference != ref || n.Forced != 2 || len(n.Probes) != 2 {
			t.Errorf("%s: numerics %+v, want both greedy probes compared teacher-forced", id, n)
			continue
		}
		for _, p := range n.Probes {
			if !p.Forced || p.Method != probe.ForceSGLang || p.Compared != refAnswer[p.Probe] {
				t.Errorf("%s %s: %+v, want every one of the reference's %d tokens compared", id, p.Probe, p, refAnswer[p.Probe])
			}
		}
		t.Logf("%s: %s, KL %.3g over %d forced tokens, first diff %v", id, r.Verdict, n.KL, n.Compared, n.FirstDiff)
	}
	tie := cells["moe=triton,fp4=flashinfer_cutlass"].Numerics
	if tie == nil || tie.FirstDiff == nil || tie.KL > classify.DegradedKL {
		t.Errorf("the tie cell: numerics %+v, want its greedy path parted and the forced KL within the floor", tie)
	}
	if drift := cells["moe=triton,fp4=flashinfer_cudnn"]; !strings.Contains(drift.Reason, "teacher-forced") {
		t.Errorf("the drifting cell's reason does not say it was scored teacher-forced: %s", drift.Reason)
	}
	if garbage := cells["moe=flashinfer_cutlass,fp4=flashinfer_cutlass"].Numerics; garbage == nil || garbage.KL < 1 {
		t.Errorf("garbage: numerics %+v, want the reference's tokens scored as unlikely", garbage)
	}
}
