//go:build linux

package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// The tests in this file run whole sessions, as bmx sweep does, on the
// simulated server (this test binary in its "sim" mode, mostly with the
// simulated SM120 host's own profile on a 50 ms start-up) or on shell
// commands.

// simServer is the [server] table of the simulated server; args follow its
// port.
func simServer(args ...string) matrixtest.Server {
	return matrixtest.Server{
		Command:      matrixtest.Sim(append([]string{"--sim-profile", "{dir}/sm120.toml"}, args...)...),
		Env:          map[string]string{"BMX_LAUNCHER_HELPER": "sim"},
		ReadyTimeout: "10s",
		StopGrace:    "1s",
		ReadyLog:     "fired up and ready to roll",
	}
}

// sm120Axes are the simulated SM120 host's two axes, as the built-in
// config lists them.
func sm120Axes() []matrixtest.Axis {
	return []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl"}},
		{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm"}},
	}
}

// writeConfig writes c, and the fast SM120 profile its server may name,
// into a directory of its own, and returns the config's path.
func writeConfig(t *testing.T, c matrixtest.Config) string {
	t.Helper()
	dir := t.TempDir()
	matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	return c.Write(t, filepath.Join(dir, "m.toml"))
}

// writeLightConfig is writeConfig with the cells asking lightProbes, not
// the smoke set and perf, for the tests that read which cells start, stop
// and how they end, not what the smoke set's batch, thinking or perf
// probes find.
func writeLightConfig(t *testing.T, c matrixtest.Config) string {
	t.Helper()
	c.Tail += "[probes]\nfile = \"probes.toml\"\n"
	config := writeConfig(t, c)
	matrixtest.WriteFile(t, filepath.Join(filepath.Dir(config), "probes.toml"), lightProbes)
	return config
}

// inDir is command run in its config's directory. A server started by a
// spare supervisor inherits the working directory this process had when the
// spare started, which a test's t.Chdir may have left and removed since; sh
// fails getcwd there before anything else, and the cell crashes on that.
func inDir(command ...string) []string {
	return append([]string{"env", "-C", "{dir}"}, command...)
}

// crashConfig: four cells that crash at start (trtllm MoE kernels are
// SM100-only on the simulated host).
func crashConfig(t *testing.T) string {
	return writeConfig(t, matrixtest.Config{Name: "crash", Server: simServer(), Axes: []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_trtllm"}},
		sm120Axes()[1],
	}})
}

// session is one session's options and what it logged.
type session struct {
	SessionOptions
	log *bytes.Buffer
}

// newTestSession is a session of config into a directory of its own, with
// this test binary as {self}.
func newTestSession(t *testing.T, config string) *session {
	self, _ := os.Executable()
	var logs bytes.Buffer
	return &session{
		SessionOptions: SessionOptions{Config: config, Out: t.TempDir(), Self: self, Log: log.New(&logs, "", 0)},
		log:            &logs,
	}
}

func (s *session) run(ctx context.Context) (*Outcome, error) {
	return NewSession(s.SessionOptions).Run(ctx)
}

// resume is a session that resumes dir and is told nothing else, as
// bmx sweep --resume DIR is.
func (s *session) resume(dir string) *session {
	var logs bytes.Buffer
	return &session{SessionOptions: SessionOptions{Resume: dir, Self: s.Self, Log: log.New(&logs, "", 0)}, log: &logs}
}

// mustRun runs the session and fails the test on an error.
func (s *session) mustRun(t *testing.T) *Outcome {
	t.Helper()
	out, err := s.run(context.Background())
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, s.log)
	}
	return out
}

// waitFor polls cond every 20 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// resultsUnder is the results file of the one run directory under out, and
// how many lines it has ("" and 0 before it exists).
func resultsUnder(out string) (string, int) {
	runs, _ := filepath.Glob(filepath.Join(out, "*", record.ResultsFile))
	if len(runs) != 1 {
		return "", 0
	}
	data, _ := os.ReadFile(runs[0])
	return runs[0], bytes.Count(data, []byte("\n"))
}

func readResults(t *testing.T, dir string) []record.Result {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	results, torn, err := record.ReadResults(f)
	if err != nil || torn {
		t.Fatalf("results.jsonl: torn %v, err %v", torn, err)
	}
	return results
}

func logNames(t *testing.T, run string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(run, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// countVerdicts counts a report's verdicts.
func countVerdicts(rep *record.Report) map[classify.Verdict]int {
	n := map[classify.Verdict]int{}
	for _, r := range rep.Results {
		n[r.Verdict]++
	}
	return n
}

// TestSessionResumeTornLine: a resume recovers from a results.jsonl whose
// last line was torn mid-write (as a kill -9 leaves it) and runs that
// cell again, leaving whole lines only.
func TestSessionResumeTornLine(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, crashConfig(t))
	dir := s.mustRun(t).Dir
	path := filepath.Join(dir, record.ResultsFile)
	lines := bytes.SplitAfter(mustRead(t, path), []byte("\n"))
	// Keep two whole lines and half of the third.
	torn := append(append(lines[0], lines[1]...), lines[2][:len(lines[2])/2]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.resume(dir)
	out := r.mustRun(t)
	if want := "resuming " + dir + ": 2 cells done, 2 to run"; !strings.Contains(r.log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, r.log)
	}
	if n := len(readResults(t, dir)); n != 4 || len(out.Report.Results) != 4 {
		t.Errorf("%d result lines, %d results reported; want 4", n, len(out.Report.Results))
	}
}

// interruptConfig: three crash cells, then a cell that hangs in graph
// capture and ignores SIGTERM; ready and grace are its ready_timeout and
// stop_grace.
func interruptConfig(t *testing.T, ready, grace string) string {
	srv := simServer()
	srv.ReadyTimeout, srv.StopGrace, srv.ReadyLog = ready, grace, ""
	return writeConfig(t, matrixtest.Config{Name: "interrupt", Server: srv,
		Axes: []matrixtest.Axis{
			{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_trtllm"}},
			{Name: "fp4", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass"}},
		},
		Tail: "[[include]]\nmoe = \"flashinfer_cutlass\"\nfp4 = \"flashinfer_cutedsl\"\n",
	})
}

// waitHanging waits until the hanging server of the run in dir is stuck in
// graph capture, where it ignores SIGTERM.
func waitHanging(t *testing.T, dir string) {
	t.Helper()
	waitFor(t, "the hanging server to reach graph capture", func() bool {
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
		for _, l := range logs {
			if data, _ := os.ReadFile(l); bytes.Contains(data, []byte("Capture cuda graph begin")) {
				return true
			}
		}
		return false
	})
}

// TestSessionInterrupt ends a session's context while a server hangs: the
// server is torn down, the finished cells are kept and the run is marked
// interrupted. A resume of the run refuses a config changed since; of the
// same config it runs each remaining cell exactly once.
func TestSessionInterrupt(t *testing.T) {
	t.Parallel()
	path := interruptConfig(t, "4s", "500ms")
	s := newTestSession(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ended struct {
		out *Outcome
		err error
	}
	done := make(chan ended, 1)
	go func() {
		out, err := s.run(ctx)
		done <- ended{out, err}
	}()
	var results string
	waitFor(t, "the crash cells", func() bool {
		var n int
		results, n = resultsUnder(s.Out)
		return n == 3
	})
	dir := filepath.Dir(results)
	waitHanging(t, dir)
	cancel()
	var e ended
	select {
	case e = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not stop after its context ended")
	}
	if !errors.Is(e.err, ErrInterrupted) || e.out == nil || e.out.Dir != dir {
		t.Fatalf("err %v, outcome %+v; want ErrInterrupted with the run directory", e.err, e.out)
	}
	if n := len(readResults(t, dir)); n != 3 || len(e.out.Report.Results) != 3 || e.out.Report.Run.Cells != 4 {
		t.Errorf("%d results kept, %d reported of %d cells; want 3 of 4", n, len(e.out.Report.Results), e.out.Report.Run.Cells)
	}
	if run, err := record.ReadRun(dir); err != nil || !run.Interrupted {
		t.Errorf("run.json interrupted=%v (%v)", run != nil && run.Interrupted, err)
	}
	if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(dir))); n != 0 {
		t.Errorf("%d processes with the run's marker outlived the interrupt", n)
	}

	orig := mustRead(t, path)
	if err := os.WriteFile(path, append(slices.Clone(orig), "\n# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if _, err := s.resume(dir).run(context.Background()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "changed since the run started") {
		t.Errorf("resume after an edit: %v", err)
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	out := s.resume(dir).mustRun(t)
	got := map[string]int{}
	for _, r := range readResults(t, dir) {
		got[r.Cell.ID]++
	}
	if len(got) != 4 {
		t.Errorf("cells %v", got)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	if n := countVerdicts(out.Report); len(out.Report.Results) != 4 || n[classify.Hang] != 1 || n[classify.Crash] != 3 {
		t.Errorf("report after resume: %v, want 1 hang, 3 crash", n)
	}
	if run, _ := record.ReadRun(dir); run.Resumed != 1 {
		t.Errorf("run.json resumed %d", run.Resumed)
	}
}

// TestSessionStoreLost removes the run directory after the first cell: the
// results store is gone, so the session starts no further cell and says
// why.
func TestSessionStoreLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	// Every server start is counted outside the run directory; each takes
	// a second, so a stall of the test between seeing the first result and
	// removing the run directory does not let a third cell start.
	srv := simServer()
	srv.Command = inDir(append([]string{"sh", "-c", `echo start >> ` + starts + `; sleep 1; exec "$0" "$@"`}, srv.Command...)...)
	srv.ReadyTimeout, srv.StopGrace, srv.ReadyLog = "20s", "500ms", ""
	s := newTestSession(t, writeConfig(t, matrixtest.Config{Name: "lost", Server: srv, Axes: []matrixtest.Axis{
		{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_trtllm"}},
		{Name: "fp4", Flag: "--fp4-gemm-backend", Values: []string{"auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm"}},
	}}))
	done := make(chan error, 1)
	go func() {
		_, err := s.run(context.Background())
		done <- err
	}()
	var results string
	waitFor(t, "the first result", func() bool {
		var n int
		results, n = resultsUnder(s.Out)
		return n >= 1
	})
	for os.RemoveAll(filepath.Dir(results)) != nil { // a log may appear meanwhile
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the session did not stop")
	}
	if !errors.Is(err, ErrStoreLost) && (err == nil || !strings.Contains(err.Error(), "create log directory")) {
		t.Errorf("err %v, want the store lost (or its log directory)", err)
	}
	if n := bytes.Count(mustRead(t, starts), []byte("\n")); n < 1 || n > 2 {
		t.Errorf("%d servers started, want the first cell and at most the one in flight when the store went", n)
	}
	if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(filepath.Dir(results)))); n != 0 {
		t.Errorf("%d servers outlived the session", n)
	}
}

// dedupeConfig sweeps the simulated SM120 host's MoE runner with "auto"
// listed last; the sim resolves auto to flashinfer_cutlass and says so in
// /get_server_info, as SGLang does.
//
// Its cells ask lightProbes, not the smoke set and perf: what the dedupe
// tests read is which cells start, what they resolved to and the verdict
// one passes on to the other.
func dedupeConfig(t *testing.T, head string) string {
	return writeLightConfig(t, matrixtest.Config{Name: "dedupe", Head: head, Server: simServer(),
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "auto"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn"}},
		},
		Tail: `[[known]]
match = { moe_runner = "flashinfer_cutlass" }
verdict = "nan"
note = "a made-up issue of flashinfer_cutlass, to see auto match it"
`})
}

const (
	autoCell    = "moe_runner=auto,fp4_gemm=flashinfer_cudnn"
	cutlassCell = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
)

// TestSessionDedupe: with dedupe the auto cell runs before
// flashinfer_cutlass (which the config lists first), resolves to it, and
// flashinfer_cutlass is not started: it inherits the auto cell's verdict,
// marked so. Known issues match the auto cell by what it resolved to.
// Without dedupe every cell starts.
func TestSessionDedupe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		head   string
		dedupe bool
		logs   int
	}{
		{"option", "", true, 2},
		{"config key", "dedupe = true", false, 2},
		{"off", "", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestSession(t, dedupeConfig(t, tc.head))
			s.Dedupe = tc.dedupe
			out := s.mustRun(t)
			rep, logs := out.Report, logNames(t, out.Dir)
			if len(logs) != tc.logs {
				t.Errorf("%d servers started (%v), want %d", len(logs), logs, tc.logs)
			}
			byID := verdicts(rep)
			a, c := byID[autoCell], byID[cutlassCell]
			if a.Cell.Resolved["moe_runner"] != "flashinfer_cutlass" {
				t.Errorf("the auto cell's resolved values: %v (server said %v)", a.Cell.Resolved, a.Resolved)
			}
			// The auto cell that resolved to flashinfer_cutlass is that
			// known issue's, and passes it (XPASS).
			if k := rep.Run.Known; len(k) != 1 || !k[0].Matches(a.Cell) || k[0].Match["moe_runner"] != "flashinfer_cutlass" || a.Verdict != classify.Correct {
				t.Errorf("the auto cell: %s, known %v", a.Verdict, k)
			}
			if rep.Run.Dedupe != (tc.logs == 2) {
				t.Errorf("run.json says dedupe %v", rep.Run.Dedupe)
			}
			if tc.logs == 3 {
				if c.InheritedFrom != "" || !slices.Contains(logs, cutlassCell+".log") {
					t.Errorf("without dedupe %s did not run: inherited from %q, logs %v", cutlassCell, c.InheritedFrom, logs)
				}
				return
			}
			if c.InheritedFrom != autoCell || c.Verdict != a.Verdict || c.Verdict != classify.Correct {
				t.Errorf("%s: inherited from %q, verdict %s (auto: %s)", cutlassCell, c.InheritedFrom, c.Verdict, a.Verdict)
			}
			if want := "inherited from " + autoCell + " (auto resolved to the same backends): "; !strings.HasPrefix(c.Reason, want) {
				t.Errorf("reason %q, want it to start %q", c.Reason, want)
			}
			if !strings.Contains(c.Repro, "--moe-runner-backend flashinfer_cutlass") {
				t.Errorf("the inherited cell's repro is not its own command: %s", c.Repro)
			}
			if slices.Contains(logs, cutlassCell+".log") {
				t.Errorf("%s was started: %v", cutlassCell, logs)
			}
			if v := byID["moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn"].Verdict; v != classify.Crash {
				t.Errorf("the trtllm cell: %s", v)
			}
		})
	}
}

// TestSessionDedupeResume: a run started with dedupe keeps deduping when
// resumed without it (run.json records it). The cutlass cell's result is
// taken out of results.jsonl, as a run cut short would lack it; the resume
// gives it the auto cell's verdict again rather than start it.
func TestSessionDedupeResume(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, dedupeConfig(t, ""))
	s.Dedupe = true
	run := s.mustRun(t).Dir
	results := filepath.Join(run, record.ResultsFile)
	var kept []string
	for _, l := range strings.SplitAfter(string(mustRead(t, results)), "\n") {
		if !strings.Contains(l, `"id":"moe_runner=flashinfer_cutlass,`) {
			kept = append(kept, l)
		}
	}
	if len(kept) != 2+1 { // two lines and the empty tail
		t.Fatalf("results.jsonl: %d lines kept", len(kept))
	}
	if err := os.WriteFile(results, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.resume(run)
	rep := r.mustRun(t).Report
	found := false
	for _, res := range rep.Results {
		if res.Cell.ID == cutlassCell {
			found = true
			if res.InheritedFrom != autoCell {
				t.Errorf("after the resume %s inherited from %q", res.Cell.ID, res.InheritedFrom)
			}
		}
	}
	if logs := logNames(t, run); !found || len(logs) != 2 || !rep.Run.Dedupe {
		t.Errorf("cutlass cell found %v, servers started %v, dedupe %v", found, logs, rep.Run.Dedupe)
	}
}

// loaderConfig is a 2x2 matrix whose server reads {model}/config.json, as a
// real server loads its model, before it starts the simulated server; a
// relative {model} is taken from the config's directory. Its cells ask
// lightProbes: the tests read which cells start and crash.
func loaderConfig(t *testing.T, model string) string {
	srv := simServer()
	srv.Command = inDir("sh", "-c", `s=$1; m=$2; shift 2; cat "$m/config.json" >/dev/null && exec "$s" sim-server --model-path "$m" "$@"`,
		"sh", "{self}", "{model}", "--host", "{host}", "--port", "{port}", "--sim-profile", "{dir}/sm120.toml")
	return writeLightConfig(t, matrixtest.Config{Name: "loader", Vars: map[string]string{"model": model}, Server: srv,
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "triton"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		}})
}

// TestSessionSetupStop: a model path the preflight cannot tell from a
// Hugging Face id ("models/x" with no ./models here) is missing; the first
// cell's server fails to load it, and the session stops there with a
// *SetupError naming the cause and the cell's log, keeping the cell, noting
// why in run.json and having the reports written; it logs nothing more.
// KeepGoing runs every cell; with the model present every cell runs.
func TestSessionSetupStop(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, loaderConfig(t, "models/qwen3-missing"))
	var written *record.Report
	s.WriteReports = func(dir string, rep *record.Report) error {
		written = rep
		return nil
	}
	out, err := s.run(context.Background())
	var setup *SetupError
	if !errors.As(err, &setup) || out == nil {
		t.Fatalf("err %v, want a *SetupError\nlog:\n%s", err, s.log)
	}
	first := "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
	want := "stopped after the first cell (" + first + "): the setup is broken, not a backend: " +
		"the model cannot be found or loaded: cat: models/qwen3-missing/config.json: No such file or directory (see " +
		filepath.Join(out.Dir, "logs", first+".log") + "); fix it or pass --keep-going"
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	for _, l := range strings.Split(strings.TrimSpace(s.log.String()), "\n") {
		if !strings.HasPrefix(l, "sweeping ") && !strings.HasPrefix(l, "note: ") {
			t.Errorf("the session logged more than where it runs and its notes: %q", l)
		}
	}
	if n := len(readResults(t, out.Dir)); n != 1 {
		t.Errorf("%d results recorded, want the first cell's only", n)
	}
	if rep := out.Report; len(rep.Results) != 1 || rep.Results[0].Verdict != classify.Crash {
		t.Errorf("results: %+v", rep.Results)
	}
	if run, err := record.ReadRun(out.Dir); err != nil || !strings.Contains(strings.Join(run.Notes, "\n"), "the setup is broken") {
		t.Errorf("run.json notes do not say why the run stopped: %v", err)
	}
	if written != out.Report {
		t.Error("the reports of the stopped run were not written")
	}

	t.Run("keep going", func(t *testing.T) {
		t.Parallel()
		s := newTestSession(t, loaderConfig(t, "models/qwen3-missing"))
		s.KeepGoing = true
		if out := s.mustRun(t); len(readResults(t, out.Dir)) != 4 {
			t.Errorf("%d results with KeepGoing, want 4", len(out.Report.Results))
		}
	})
	t.Run("model present", func(t *testing.T) {
		t.Parallel()
		model := filepath.Join(t.TempDir(), "models", "qwen3")
		matrixtest.WriteFile(t, filepath.Join(model, "config.json"), "{}")
		if out := newTestSession(t, loaderConfig(t, model)).mustRun(t); len(readResults(t, out.Dir)) != 4 {
			t.Errorf("%d results, want 4", len(out.Report.Results))
		}
	})
}

// TestSessionCollidingValues: axis values that differ only in characters
// awkward in file names each get their own log.
func TestSessionCollidingValues(t *testing.T) {
	t.Parallel()
	values := []string{"p/q", "p_q", "p:q", "p q"}
	out := newTestSession(t, writeConfig(t, matrixtest.Config{Name: "collide",
		Server: matrixtest.Server{Command: inDir("sh", "-c", `echo "I am $3"; exit 1`, "sh", "{port}"), ReadyTimeout: "20s"},
		Axes:   []matrixtest.Axis{{Name: "a", Flag: "--a", Values: values}},
	})).mustRun(t)
	logs, _ := filepath.Glob(filepath.Join(out.Dir, "logs", "*.log"))
	if len(logs) != 4 {
		t.Fatalf("%d logs, want 4: %v", len(logs), logs)
	}
	for _, v := range values {
		found := 0
		for _, l := range logs {
			if strings.Contains(string(mustRead(t, l)), "I am "+v+"\n") {
				found++
			}
		}
		if found != 1 {
			t.Errorf("value %q: in %d logs, want 1", v, found)
		}
	}
}

// TestSessionSecrets gives a session a secret in every form and place
// (matrixtest.Secrets: a server that prints them all; bmx's own environment
// is the CLI test's, TestSecretsNeverWritten), then greps every file of the
// run, their names and the session's log for them.
func TestSessionSecrets(t *testing.T) {
	t.Parallel()
	sc := matrixtest.Secrets()
	cfg, secrets := sc.Config, sc.Secrets
	cfg.Server.Env["BMX_LAUNCHER_HELPER"] = "sim"
	cfg.Server.Command = inDir(cfg.Server.Command...)
	s := newTestSession(t, writeConfig(t, cfg))
	s.Vars = sc.Vars
	out := s.mustRun(t)
	texts := map[string]string{"the session's log": s.log.String()}
	files := 0
	filepath.WalkDir(out.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			texts[p] = p + "\n" + string(mustRead(t, p)) // the name counts too
			files++
		}
		return nil
	})
	if files < 4 { // run.json, results.jsonl, 2 logs
		t.Fatalf("only %d files in the run", files)
	}
	// The server did print them: the check is not vacuous.
	logs, _ := filepath.Glob(filepath.Join(out.Dir, "logs", "*.log"))
	if len(logs) != 2 || !strings.Contains(texts[logs[0]], "argv: ") {
		t.Fatalf("logs %v", logs)
	}
	for _, printed := range []string{"--tok <redacted>", "--pw <redacted>", "DBG=<redacted>", "https://bob:<redacted>@models.example/m", "MIRROR_URL=https://amy:<redacted>@mirror.example/m"} {
		if !strings.Contains(texts[logs[0]], printed) {
			t.Errorf("the server's log does not show %q:\n%s", printed, texts[logs[0]])
		}
	}
	for where, text := range texts {
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %s", where, secret)
			}
		}
	}
}

// TestSessionShard: a shard sweeps its cells into a run directory named for
// it, with shard.json; a resume keeps the shard and refuses another.
func TestSessionShard(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, writeLightConfig(t, matrixtest.Config{Name: "sim-sm120",
		Head:   `reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`,
		Server: simServer(), Axes: sm120Axes()}))
	s.Only = []string{"moe_runner=flashinfer_trtllm"}
	s.Shard = matrix.Shard{Index: 0, Count: 2}
	out := s.mustRun(t)
	if !strings.HasSuffix(out.Dir, "-sim-sm120-shard0of2") {
		t.Errorf("run directory %s is not named for its shard", out.Dir)
	}
	rec, err := record.ReadShard(out.Dir)
	if err != nil || rec == nil {
		t.Fatalf("shard.json: %+v, %v", rec, err)
	}
	// The 4 trtllm cells in 2 shards, and the reference (which --only
	// leaves out) in each as well.
	if rep := out.Report; len(rep.Results) != 3 || rep.Run.Cells != 3 || len(rec.Assignment.Of) != 4 || rec.Assignment.Reference == "" {
		t.Errorf("%d results of %d cells, %d cells dealt, reference %q; want 3 of 3, 4", len(rep.Results), rep.Run.Cells, len(rec.Assignment.Of), rec.Assignment.Reference)
	}
	for _, r := range out.Report.Results {
		if r.Cell.ID != rec.Assignment.Reference && rec.Assignment.Of[r.Cell.ID] != 0 {
			t.Errorf("%s ran in shard 0 but was dealt to %d", r.Cell.ID, rec.Assignment.Of[r.Cell.ID])
		}
	}
	other := s.resume(out.Dir)
	other.Shard = matrix.Shard{Index: 1, Count: 2}
	var ce *ConfigError
	if _, err := other.run(context.Background()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "the run is shard 0/2, not 1/2") {
		t.Errorf("resume as another shard: %v", err)
	}
	r := s.resume(out.Dir)
	r.mustRun(t)
	if !strings.Contains(r.log.String(), "3 cells done, 0 to run") {
		t.Errorf("resume:\n%s", r.log)
	}
}

// TestSessionResumeKillsLeftovers: a resume kills what the attempt before
// it left running, found by the marker run.json records, and for a run
// recorded before run.json had one, by the old "<directory name>/" marker.
func TestSessionResumeKillsLeftovers(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs sleep (coreutils)")
	}
	s := newTestSession(t, crashConfig(t))
	s.Only = []string{"fp4_gemm=flashinfer_cudnn"}
	dir := s.mustRun(t).Dir
	for _, tc := range []struct {
		name   string
		marker func(run *record.Run) string
	}{
		{"marker in run.json", func(run *record.Run) string { return run.Marker }},
		{"run.json of an older bmx", func(run *record.Run) string {
			run.Marker = ""
			if err := record.WriteRun(dir, run); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(dir) + "/"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := record.ReadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			notes := killNotes(run)
			prefix := tc.marker(run)
			if prefix == "" {
				t.Fatal("run.json records no marker")
			}
			left := exec.Command("sleep", "60")
			left.Env = append(os.Environ(), server.MarkerEnv+"="+prefix+"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn#1")
			if err := left.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- left.Wait() }()
			t.Cleanup(func() { left.Process.Kill() })
			s.resume(dir).mustRun(t)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the leftover outlived the resume")
			}
			if run, _ := record.ReadRun(dir); killNotes(run) != notes+1 {
				t.Errorf("run.json notes %q: want one more saying a leftover was killed", run.Notes)
			}
		})
	}
}

// killNotes counts a run's notes of leftovers killed on resume.
func killNotes(run *record.Run) int {
	n := 0
	for _, note := range run.Notes {
		if strings.Contains(note, "killed 1 leftover processes") {
			n++
		}
	}
	return n
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startOrder is a Progress that notes the cells in the order they start.
type startOrder struct {
	mu    sync.Mutex
	began bool
	cells []string
}

func (p *startOrder) Begin(int, int) { p.began = true }
func (p *startOrder) Start(_ int, c matrix.Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cells = append(p.cells, c.ID)
}
func (p *startOrder) Done(int, record.Result) {}
func (p *startOrder) End()                    {}

// TestSessionBaseline: the informative order starts the cells a baseline
// run saw work before those it saw fail, and, among those expected to fail,
// the ones with fewer values its blame table blames; a baseline that is not
// a run is a *ConfigError before anything starts.
func TestSessionBaseline(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, matrixtest.Config{Name: "order",
		Server: matrixtest.Server{Command: inDir("sh", "-c", "exit 1", "sh", "{port}"), ReadyTimeout: "20s"},
		Axes:   []matrixtest.Axis{{Name: "v", Flag: "--v", Values: []string{"a", "b", "c"}}},
	})
	base := t.TempDir()
	if err := record.WriteRun(base, &record.Run{Name: "order", ConfigPath: config, Config: string(mustRead(t, config)), Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	store, err := record.OpenStore(base)
	if err != nil {
		t.Fatal(err)
	}
	err = store.Append(record.Result{Cell: matrix.Cell{ID: "v=a", Values: []matrix.AxisValue{{Axis: "v", Value: "a"}}}, Verdict: classify.Crash, Signature: "RuntimeError: a is broken"})
	if cerr := store.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	var blamedWith *record.Report
	for _, tc := range []struct {
		name     string
		baseline string
		blamed   []matrix.AxisValue
		want     []string
	}{
		{"none", "", nil, []string{"v=a", "v=b", "v=c"}},
		{"a failed", base, nil, []string{"v=b", "v=c", "v=a"}},
		{"a failed, b blamed", base, []matrix.AxisValue{{Axis: "v", Value: "b"}}, []string{"v=c", "v=b", "v=a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, config)
			p := &startOrder{}
			s.Progress, s.Baseline, s.Order = p, tc.baseline, matrix.OrderInformative
			s.Blamed = func(b *record.Report) []matrix.AxisValue {
				blamedWith = b
				return tc.blamed
			}
			s.mustRun(t)
			if !slices.Equal(p.cells, tc.want) {
				t.Errorf("cells started %v, want %v", p.cells, tc.want)
			}
		})
	}
	if blamedWith == nil || len(blamedWith.Results) != 1 || blamedWith.Results[0].Cell.ID != "v=a" {
		t.Errorf("the blame function was handed %+v, not the baseline run", blamedWith)
	}
	s := newTestSession(t, config)
	p := &startOrder{}
	s.Progress, s.Baseline = p, t.TempDir()
	var ce *ConfigError
	if _, err := s.run(context.Background()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "--baseline "+s.Baseline) || p.began {
		t.Errorf("a baseline that is not a run: %v (started: %v)", err, p.began)
	}
}

// TestSessionExcludedCounted: a run whose excludes remove more cells than
// run.json lists records their count alone, in run.json and the report.
func TestSessionExcludedCounted(t *testing.T) {
	var b strings.Builder
	b.WriteString("name = \"many\"\n[server]\ncommand = [\"env\", \"-C\", \"{dir}\", \"sh\", \"-c\", \"exit 1\", \"sh\", \"--port\", \"{port}\"]\n")
	b.WriteString("[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\", \"y\"]\n[[axis]]\nname = \"b\"\nflag = \"--b\"\nvalues = [")
	n := record.MaxListedExcluded + 1
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "\"v%d\"", i)
	}
	b.WriteString("]\n[[exclude]]\na = \"y\"\n")
	path := filepath.Join(t.TempDir(), "m.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, path)
	s.Only, s.MaxCells, s.KeepGoing = []string{"b=v0"}, 2*n, true
	out, err := s.run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log)
	}
	run, err := record.ReadRunDir(out.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Excluded) != 0 || run.ExcludedCount != n || out.Report.Run.ExcludedCells() != n {
		t.Errorf("run.json lists %d excluded cells and counts %d, the report %d; want 0 and %d", len(run.Excluded), run.ExcludedCount, out.Report.Run.ExcludedCells(), n)
	}
	if len(out.Report.Results) != 1 || out.Report.Results[0].Cell.ID != "a=x,b=v0" {
		t.Errorf("results %v, want the one cell a=x,b=v0", out.Report.Results)
	}
}
