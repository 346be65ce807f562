//go:build linux

package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// fourAxisProfile is a simulated host on which one value of each of two
// axes is broken (moe_runner=flashinfer_trtllm, attention=trtllm_mha), each
// with a signature of its own; every other combination works.
func fourAxisProfile(startup string) matrixtest.Profile {
	return matrixtest.Profile{Name: "four-axis", Startup: startup, Body: `[speed]
first_token_latency = "1ms"
token_latency = "200us"
[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
behaviour = "crash"
error = "RuntimeError: trtllm-gen MoE kernels are SM100-only"
frame = "flashinfer/fused_moe/core.py"
[[rule]]
when = { attention_backend = "trtllm_mha" }
behaviour = "crash"
error = "RuntimeError: trtllm_mha attention kernels need SM100"
frame = "sglang/srt/layers/attention/trtllm_mha_backend.py"
`}
}

// fourAxisConfig: 3 x 2 x 3 x 2 = 36 cells, no reference, the broken values
// listed first (the newest backends, as a user would list them).
var fourAxisConfig = matrixtest.Config{
	Name: "four-axis",
	Server: matrixtest.Server{
		Command:      matrixtest.Sim("--reasoning-parser", "qwen3", "--sim-profile", "{dir}/profile.toml"),
		Env:          map[string]string{"BMX_LAUNCHER_HELPER": "sim"},
		ReadyTimeout: "6s", ProbeTimeout: "20s", StopGrace: "1s",
		ReadyLog: "fired up and ready to roll",
	},
	Axes: []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_trtllm", "flashinfer_cutlass", "triton"}},
		{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		{Name: "attention", Flag: "--attention-backend", Values: []string{"trtllm_mha", "flashinfer", "triton"}},
		{Name: "tp", Flag: "--tp", Values: []string{"8", "4"}},
	},
}

// writeFourAxis writes the 4-axis config and its profile into a directory.
func writeFourAxis(t testing.TB, startup string) string {
	dir := t.TempDir()
	fourAxisProfile(startup).Write(t, filepath.Join(dir, "profile.toml"))
	return fourAxisConfig.Write(t, filepath.Join(dir, "four.toml"))
}

// writeFourAxisLight is writeFourAxis with two greedy probes and no
// performance probe: what pruning reads is which cells start, crash and
// with which signature, and which answer like the reference; the smoke
// set's batch, thinking and perf probes would cost each correct cell three
// times the work and tell pruning nothing more.
func writeFourAxisLight(t testing.TB, startup string) string {
	dir := t.TempDir()
	fourAxisProfile(startup).Write(t, filepath.Join(dir, "profile.toml"))
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), lightProbes)
	c := fourAxisConfig
	c.Tail += "[probes]\nfile = \"probes.toml\"\n"
	return c.Write(t, filepath.Join(dir, "four.toml"))
}

// lightProbes are two greedy probes whose answers the reference's are
// compared with, and no performance probe.
const lightProbes = `[[probe]]
name = "say-ok"
prompt = "Say 'OK'"
max_tokens = 32
expect = { contains = "OK" }

[[probe]]
name = "math"
prompt = "What is 300+23?"
max_tokens = 64
expect = { number = 323 }

[perf]
enabled = false
`

// writeSimSM120 writes the built-in simulated SM120 matrix with the sm120
// profile's start-up set to startup, and its ready timeout (6 s) to ready
// unless that is empty.
func writeSimSM120(t testing.TB, startup, ready string) string {
	dir := t.TempDir()
	cfg, err := matrix.Builtin(nil)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(cfg.Source, `"--watchdog-timeout", "30"]`, `"--watchdog-timeout", "30", "--sim-profile", "{dir}/profile.toml"]`, 1)
	src = strings.Replace(src, "[server]\n", "[server]\nenv = { BMX_LAUNCHER_HELPER = \"sim\" }\n", 1)
	if ready != "" {
		src = strings.Replace(src, `ready_timeout = "6s"`, `ready_timeout = "`+ready+`"`, 1)
	}
	if !strings.Contains(src, "--sim-profile") || !strings.Contains(src, "BMX_LAUNCHER_HELPER") ||
		ready != "" && !strings.Contains(src, `ready_timeout = "`+ready+`"`) {
		t.Fatal("the built-in config changed shape")
	}
	matrixtest.WriteFile(t, filepath.Join(dir, "profile.toml"), matrixtest.SM120(t, startup))
	return matrixtest.WriteFile(t, filepath.Join(dir, "sim-sm120.toml"), src)
}

// sweepFigures are what one sweep cost.
type sweepFigures struct {
	rep          *record.Report
	dir          string
	starts       int           // servers started
	wall         time.Duration // to the full map
	firstCorrect time.Duration // to the end of the first correct cell (0: none)
	firstAfter   int           // server starts until then
}

// firstCorrect is a Progress that notes when the first correct cell ends.
type firstCorrect struct {
	mu      sync.Mutex
	t0      time.Time
	started int
	at      time.Duration
	after   int
}

func (f *firstCorrect) Begin(int, int) { f.t0 = time.Now() }
func (f *firstCorrect) Start(int, matrix.Cell) {
	f.mu.Lock()
	f.started++
	f.mu.Unlock()
}
func (f *firstCorrect) Done(_ int, r record.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == 0 && r.Verdict == classify.Correct {
		f.at, f.after = time.Since(f.t0), f.started
	}
}
func (f *firstCorrect) End() {}

// sweepWith runs a whole session of config (or resumes dir) and measures it.
func sweepWith(t testing.TB, config, order string, prune bool, resume string, confirm bool) sweepFigures {
	t.Helper()
	f, err := sweepInto(t.TempDir(), config, order, prune, resume, confirm)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sweepInto is sweepWith into the directory out, and safe to call from any
// goroutine: it returns its error rather than failing a test.
func sweepInto(out, config, order string, prune bool, resume string, confirm bool) (sweepFigures, error) {
	self, _ := os.Executable()
	fc := &firstCorrect{}
	opts := SessionOptions{Config: config, Out: out, Self: self, Order: order, Prune: prune, Progress: fc, Resume: resume, Confirm: confirm}
	t0 := time.Now()
	o, err := NewSession(opts).Run(context.Background())
	if err != nil {
		return sweepFigures{}, err
	}
	return sweepFigures{rep: o.Report, dir: o.Dir, starts: fc.started, wall: time.Since(t0), firstCorrect: fc.at, firstAfter: fc.after}, nil
}

func verdicts(rep *record.Report) map[string]record.Result {
	m := map[string]record.Result{}
	for _, r := range rep.Results {
		m[r.Cell.ID] = r
	}
	return m
}

// checkNothingHidden compares a full run with a pruned one: every cell the
// full run finds correct is correct in the pruned run too (never predicted),
// no prediction is correct, and each rests on cells that ran.
func checkNothingHidden(t *testing.T, full, pruned *record.Report) (predicted int) {
	t.Helper()
	p := verdicts(pruned)
	for _, r := range full.Results {
		got, ok := p[r.Cell.ID]
		if !ok {
			t.Errorf("%s: missing from the pruned run", r.Cell.ID)
			continue
		}
		if r.Verdict == classify.Correct && got.Verdict != classify.Correct {
			t.Errorf("%s: correct in the full run, %s with --prune (%s)", r.Cell.ID, got.Verdict, got.Reason)
		}
		if got.Verdict != classify.Predicted {
			continue
		}
		predicted++
		pr := got.Prediction
		if pr == nil || pr.Verdict == classify.Correct || len(pr.Cells) < 2 {
			t.Errorf("%s: prediction %+v", r.Cell.ID, pr)
			continue
		}
		for _, id := range pr.Cells {
			if e := p[id]; e.Verdict != pr.Verdict || e.Signature != pr.Signature {
				t.Errorf("%s: evidence %s is %s %q, not %s %q", r.Cell.ID, id, e.Verdict, e.Signature, pr.Verdict, pr.Signature)
			}
		}
	}
	return predicted
}

// TestPruneHidesNoCorrectCell sweeps each matrix whole (file order, no
// pruning) and pruned (informative order), then confirms the pruned run's
// predictions: pruning hides no correct cell, and --confirm gives the full
// map. The matrices, and the two sweeps of a matrix, are independent runs,
// so they run at once, within this one parallel test (parallel subtests
// would take more of the package's parallel slots, GOMAXPROCS of them, from
// the other sweep tests). The simulated servers start in 20 ms (what a
// start-up costs does not enter a verdict), and the sim-sm120 matrix's
// ready timeout, which its hang cell waits out in the full sweep and in the
// pruned or the --confirm one, is 3 s, not 6: still ten times what a
// 20 ms server takes to be ready on a loaded machine.
func TestPruneHidesNoCorrectCell(t *testing.T) {
	t.Parallel()
	var matrices sync.WaitGroup
	for _, tc := range []struct {
		name, config string
		minPredicted int
	}{
		{"four-axis", writeFourAxisLight(t, "20ms"), 4},
		{"sim-sm120", writeSimSM120(t, "20ms", "3s"), 2},
	} {
		matrices.Go(func() {
			t.Run(tc.name, func(t *testing.T) {
				var full sweepFigures
				var fullErr error
				var wg sync.WaitGroup
				out := t.TempDir()
				wg.Go(func() { full, fullErr = sweepInto(out, tc.config, matrix.OrderFile, false, "", false) })
				pruned := sweepWith(t, tc.config, matrix.OrderInformative, true, "", false)
				wg.Wait()
				if fullErr != nil {
					t.Fatal(fullErr)
				}
				n := checkNothingHidden(t, full.rep, pruned.rep)
				if n < tc.minPredicted || pruned.starts+n != full.starts {
					t.Errorf("%d predicted, %d starts with --prune, %d without", n, pruned.starts, full.starts)
				}
				// --confirm runs the predicted cells; then the map is the full one.
				confirmed := sweepWith(t, "", "", false, pruned.dir, true)
				if confirmed.starts != n {
					t.Errorf("--confirm started %d servers, want the %d predicted cells", confirmed.starts, n)
				}
				got := verdicts(confirmed.rep)
				for _, r := range full.rep.Results {
					if got[r.Cell.ID].Verdict != r.Verdict {
						t.Errorf("%s: %s after --confirm, %s in the full run", r.Cell.ID, got[r.Cell.ID].Verdict, r.Verdict)
					}
				}
			})
		})
	}
	matrices.Wait()
}

// TestResumeKeepsSetupCheck: a resumed sweep whose first cell left is
// predicted by prune decides it without a server, then runs the first cell
// that needs one alone, so a broken setup still stops the sweep there (one
// server started) rather than failing every cell.
func TestResumeKeepsSetupCheck(t *testing.T) {
	sw, cells := newSweep(t, `[server]
command = ["sh", "-c", "echo 'sh: 1: /opt/missing/server: not found' >&2; exit 127"]
ready_timeout = "10s"
[[axis]]
name = "a"
flag = "--a"
values = ["v", "w"]
[[axis]]
name = "b"
flag = "--b"
values = ["1", "2", "3"]
`)
	for _, c := range cells[:2] { // a=v crashed alike with b=1 and b=2
		sw.Evidence = append(sw.Evidence, record.Result{Cell: c, Verdict: classify.Crash, Signature: "RuntimeError: v is broken"})
	}
	sw.PruneAfter, sw.StopOnSetup = 2, true
	results, err := sw.Run(context.Background(), cells[2:])
	var setup *SetupError
	if !errors.As(err, &setup) || setup.Cell != cells[3].ID {
		t.Fatalf("err %v, want the setup error of %s", err, cells[3].ID)
	}
	if len(results) != 2 || results[0].Prediction == nil || results[0].Cell.ID != cells[2].ID {
		t.Errorf("results %+v: want %s predicted, then %s", results, cells[2].ID, cells[3].ID)
	}
	logs, _ := os.ReadDir(filepath.Join(sw.Dir, "logs"))
	if len(logs) != 1 {
		t.Errorf("%d servers started, want 1", len(logs))
	}
}
