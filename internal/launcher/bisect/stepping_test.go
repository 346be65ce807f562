package bisect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
	"github.com/bmx-dev/bmx/internal/reports/across"
)

// update regenerates testdata/steps from real bisects of the simulated
// host (go test ./internal/launcher/bisect -run TestStepping -update),
// instead of replaying the recorded step results.
var update = flag.Bool("update", false, "bisect the simulated host with a real bmx again and rewrite testdata/steps")

// stepsDir holds one results.jsonl per recorded bisect: the result of
// every cell run a real bisect of the simulated host took, in order.
var stepsDir = filepath.Join("testdata", "steps")

// nine are the simulated versions the bisects walk.
var nine = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}

// The built-in host's cells the bisects follow: crashes from version 6
// on; decodes five times slower from version 5 on.
var (
	crashes = []string{"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"}
	slows   = []string{"moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"}
)

// skipConfig writes a config into dir whose environment at version 5 does
// not start (its profile file is missing): the cell crashes from 6 on.
func skipConfig(dir string) string {
	profile := "name = \"v\"\n[[rule]]\nwhen = {}\nsince = 6\nbehaviour = \"crash\"\nerror = \"RuntimeError: broken from 6\"\n"
	for _, v := range nine {
		if v == "5" {
			continue
		}
		os.WriteFile(filepath.Join(dir, v+".toml"), []byte(profile), 0o644)
	}
	cfg := matrixtest.Config{Name: "skip", Vars: map[string]string{"sim_version": "1"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}",
			"--sim-profile", "{dir}/{sim_version}.toml", "--sim-version", "{sim_version}"}, ReadyTimeout: "10s"},
		Axes: []matrixtest.Axis{{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass"}}},
	}.String()
	path := filepath.Join(dir, "m.toml")
	os.WriteFile(path, []byte(cfg), 0o644)
	return path
}

// stepCase is a recorded bisect: its name under testdata/steps and its
// options but for Out (config: writes the config into a folder, "" the
// built-in host).
type stepCase struct {
	name   string
	cell   []string
	perf   bool
	config func(dir string) string
}

var stepCases = []stepCase{
	{name: "verdict", cell: crashes},
	{name: "perf", cell: slows, perf: true},
	{name: "skip", cell: []string{"moe=flashinfer_cutlass"}, config: skipConfig},
}

// options are the case's bisect options along nine versions into out.
func (c stepCase) options(t *testing.T, out string) Options {
	o := Options{Cell: c.cell, Along: "sim_version", Values: nine, Perf: c.perf, Out: out, Vars: map[string]string{},
		PerfDrop: perfDrop}
	if c.config != nil {
		o.Config = c.config(t.TempDir())
	}
	return o
}

// perfDrop is cmd/bmx's rule for a perf step: a drop of tok/s per request
// at concurrency 1 by the perf gate's rule.
func perfDrop(good, r record.Result) (string, bool) {
	for _, c := range reports.PerfChangesOf(good, r) {
		if c.Kind == reports.PerfRegression && c.Concurrency == 1 && c.Metric == reports.MetricTokensPerSecond {
			return fmt.Sprintf("%s at concurrency %d: %.1f -> %.1f (%+.0f%%)", c.Metric, c.Concurrency, c.Base.Median, c.New.Median, c.Change*100), true
		}
	}
	return "", false
}

// recordSteps builds bmx and runs each case's bisect with it, a real bmx
// bisect process (cells on the simulated server), writing the results each
// took to testdata/steps/<name>.jsonl.
func recordSteps() error {
	work, err := os.MkdirTemp("", "bisect-steps")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bmx := filepath.Join(work, "bmx")
	if b, err := matrixtest.Build("github.com/bmx-dev/bmx/cmd/bmx", bmx); err != nil {
		return fmt.Errorf("building bmx: %v\n%s", err, b)
	}
	if err := os.MkdirAll(stepsDir, 0o755); err != nil {
		return err
	}
	for _, c := range stepCases {
		dir := filepath.Join(work, c.name)
		out := filepath.Join(dir, "runs")
		args := []string{"bisect", "-q", "--cell", strings.Join(c.cell, ","), "--along", "sim_version=" + strings.Join(nine, ","), "--out", out}
		if c.perf {
			args = append(args, "--perf")
		}
		if c.config != nil {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			args = append(args, "-c", c.config(dir))
		}
		if b, err := exec.Command(bmx, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("bmx %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		runs, _ := filepath.Glob(filepath.Join(out, "*", record.ResultsFile))
		if len(runs) != 1 {
			return fmt.Errorf("%s: %d run directories under %s, want 1", c.name, len(runs), out)
		}
		b, err := os.ReadFile(runs[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(stepsDir, c.name+".jsonl"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var (
	recordOnce sync.Once
	recordErr  error
)

// replay is a runCell that gives the recorded results of the case's real
// bisect, by cell and attempt, instead of running the cell; it fails the
// test on a step the real bisect did not take. ran counts the steps it
// gave.
type replay struct {
	t       *testing.T
	name    string
	results map[string][]record.Result
	mu      sync.Mutex
	ran     []string
}

func newReplay(t *testing.T, name string) *replay {
	t.Helper()
	if *update {
		recordOnce.Do(func() { recordErr = recordSteps() })
		if recordErr != nil {
			t.Fatal(recordErr)
		}
	}
	f, err := os.Open(filepath.Join(stepsDir, name+".jsonl"))
	if err != nil {
		t.Fatalf("%v (go test ./internal/launcher/bisect -run TestStepping -update records it)", err)
	}
	defer f.Close()
	rp := &replay{t: t, name: name, results: map[string][]record.Result{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r record.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		r.Attempts = nil // the bisect adds the earlier attempt itself
		rp.results[r.Cell.ID] = append(rp.results[r.Cell.ID], r)
	}
	return rp
}

func (rp *replay) run(_ context.Context, _ *launcher.Sweep, cell matrix.Cell, attempt int) (record.Result, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rs := rp.results[cell.ID]
	if attempt > len(rs) {
		rp.t.Errorf("%s: no recorded attempt %d of %s: the real bisect did not take this step", rp.name, attempt, cell.ID)
		return record.Result{}, fmt.Errorf("not recorded: %s attempt %d", cell.ID, attempt)
	}
	rp.ran = append(rp.ran, cell.ID)
	return rs[attempt-1], nil
}

// countLines is the number of lines of the file at path.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// TestStepping bisects along nine versions of the simulated host, each
// step's cell given by the result a real bisect recorded for it: the
// working cell crashes from version 6 on; the CuTe DSL pair decodes five
// times slower from 5 on (perf). Each takes at most five cell runs (2 ends
// + log2(8)), every visited result is in the one run directory, and the
// finding says what changed.
func TestStepping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lastGood, firstBad, text string
	}{
		{"verdict", "5", "6", "crash (CUDA error: an illegal memory access was encountered) from 6 on; 5 correct"},
		{"perf", "4", "5", "tok/s per request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := stepCases[0]
			if tc.name == "perf" {
				c = stepCases[1]
			}
			o := c.options(t, t.TempDir())
			rp := newReplay(t, c.name)
			o.runCell = rp.run
			out, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			b := out.Bisect
			f := b.Finding
			if !b.Done || f == nil || f.LastGood != tc.lastGood || f.FirstBad != tc.firstBad || len(f.Candidates) > 0 {
				t.Fatalf("finding %+v, want last good %s, first bad %s", f, tc.lastGood, tc.firstBad)
			}
			var text strings.Builder
			if err := across.Bisect(&text, b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(f.Text, tc.text) || !strings.Contains(text.String(), f.Text) {
				t.Errorf("finding %q, want it to say %q, and bmx's text to hold it:\n%s", f.Text, tc.text, &text)
			}
			if !strings.Contains(text.String(), "first bad: sim_version="+tc.firstBad) || !strings.Contains(text.String(), "cell runs") {
				t.Errorf("bmx's text:\n%s", &text)
			}
			results := countLines(t, filepath.Join(out.Dir, record.ResultsFile))
			if b.Runs > 5 || results != b.Runs || len(rp.ran) != b.Runs {
				t.Errorf("%d cell runs (%d run, %d results), want at most 5, each recorded", b.Runs, len(rp.ran), results)
			}
			onDisk, err := record.ReadBisect(out.Dir)
			if err != nil || onDisk.Finding == nil || onDisk.Finding.Text != f.Text || !onDisk.Done {
				t.Errorf("bisect.json: %+v, %v; want the finding, done", onDisk, err)
			}
			if run, err := record.ReadRun(out.Dir); err != nil || run.Cells != 9 || !strings.Contains(strings.Join(run.Notes, " "), "bisect of ") {
				t.Errorf("run.json: %+v, %v", run, err)
			}
		})
	}
}

// TestSteppingSkip bisects a config whose environment at version 5 does
// not start (its profile file is missing; the recorded results are a real
// bisect's): the step is run twice, then skipped, and the finding names
// the values the first bad one is among.
func TestSteppingSkip(t *testing.T) {
	t.Parallel()
	o := stepCases[2].options(t, t.TempDir())
	rp := newReplay(t, "skip")
	o.runCell = rp.run
	out, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	b := out.Bisect
	f := b.Finding
	if f == nil || f.LastGood != "4" || f.FirstBad != "6" || strings.Join(f.Skipped, ",") != "5" || strings.Join(f.Candidates, ",") != "5,6" {
		t.Fatalf("finding %+v, want 4 good, 6 bad, 5 skipped", f)
	}
	var sides []string
	for _, s := range b.Steps {
		if s.Value == "5" {
			sides = append(sides, s.Side)
		}
	}
	if strings.Join(sides, ",") != "retry,skip" || b.Runs != 7 {
		t.Errorf("version 5 steps %v, %d runs; want retry,skip in 7 runs", sides, b.Runs)
	}
	var text strings.Builder
	if err := across.Bisect(&text, b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "first bad: one of sim_version=5,6") || !strings.Contains(text.String(), "did not start") ||
		!strings.Contains(f.Text, "from one of 5, 6 (skipped: 5) on") {
		t.Errorf("bmx's text does not say the skip:\n%s", &text)
	}
	var second *record.Result
	for _, r := range out.Report.Results {
		if strings.HasSuffix(r.Cell.ID, "sim_version=5") && len(r.Attempts) > 0 {
			second = &r
		}
	}
	if second == nil || len(second.Attempts) != 1 {
		t.Errorf("the second run of version 5 does not keep the first as its earlier attempt")
	}
}

// TestSteppingResume interrupts a bisect after its two ends are recorded
// and starts the same bisect again: it finds the unfinished run directory
// in Out, reads the recorded steps instead of running them and finishes,
// in the same five cell runs as an uninterrupted bisect. Resume of the
// finished bisect's directory runs nothing and finds the same.
func TestSteppingResume(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	rp := newReplay(t, "verdict")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	o := stepCases[0].options(t, out)
	o.runCell = func(ctx context.Context, sw *launcher.Sweep, cell matrix.Cell, attempt int) (record.Result, error) {
		if n++; n == 3 {
			cancel() // as a SIGINT while the first halving step runs: its result is not kept
		}
		return rp.run(ctx, sw, cell, attempt)
	}
	first, err := Run(ctx, o)
	if !errors.Is(err, ErrInterrupted) || first == nil {
		t.Fatalf("interrupted bisect: %v, want ErrInterrupted", err)
	}
	results := filepath.Join(first.Dir, record.ResultsFile)
	kept := countLines(t, results)
	if prev, err := record.ReadBisect(first.Dir); err != nil || prev.Done || kept != 2 || prev.Runs != 2 {
		t.Fatalf("after the interrupt: %+v, %v, %d results; want an unfinished bisect of 2 runs", prev, err, kept)
	}
	if run, err := record.ReadRun(first.Dir); err != nil || !run.Interrupted {
		t.Errorf("run.json does not say interrupted: %+v, %v", run, err)
	}

	var logb bytes.Buffer
	o = stepCases[0].options(t, out)
	rp.ran = nil
	o.runCell, o.Log = rp.run, log.New(&logb, "", 0)
	again, err := Run(context.Background(), o)
	if err != nil || !again.Resumed || again.Dir != first.Dir || !strings.Contains(logb.String(), "resuming the bisect in "+first.Dir) {
		t.Fatalf("the same bisect again: %v, resumed %v in %s; want it to resume %s\n%s", err, again != nil && again.Resumed, again.Dir, first.Dir, logb.String())
	}
	b := again.Bisect
	if b.Finding == nil || b.Finding.FirstBad != "6" || b.Runs != 5 || countLines(t, results) != 5 {
		t.Fatalf("after resuming (%d results kept): finding %+v, %d runs, %d results; want 6 in 5 runs", kept, b.Finding, b.Runs, countLines(t, results))
	}
	if ran := strings.Count(logb.String(), "running "); ran != 5-kept || len(rp.ran) != 5-kept {
		t.Errorf("the resume ran %d cells (%d said), want %d (5 less the %d recorded)\n%s", len(rp.ran), ran, 5-kept, kept, logb.String())
	}
	if run, err := record.ReadRun(first.Dir); err != nil || run.Interrupted || run.Resumed != 1 {
		t.Errorf("run.json after the resume: %+v, %v; want resumed once, not interrupted", run, err)
	}

	rp.ran = nil
	logb.Reset()
	done, err := Run(context.Background(), Options{Resume: first.Dir, runCell: rp.run, PerfDrop: perfDrop, Log: log.New(&logb, "", 0)})
	if err != nil || len(rp.ran) != 0 || strings.Contains(logb.String(), "running ") || countLines(t, results) != 5 {
		t.Fatalf("Resume of the finished bisect: %v, ran %d cells\n%s", err, len(rp.ran), logb.String())
	}
	if done.Bisect.Finding == nil || done.Bisect.Finding.Text != b.Finding.Text {
		t.Errorf("Resume of the finished bisect finds %+v, want %q", done.Bisect.Finding, b.Finding.Text)
	}
}
