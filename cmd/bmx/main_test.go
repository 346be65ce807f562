package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/launcher/sim"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// asBMX names the environment variable that makes this test binary bmx.
const asBMX = "BMX_TEST_AS_BMX"

// testVersion names the environment variable that gives the bmx processes
// of the tests the version the test process found (see TestMain).
const testVersion = "BMX_TEST_VERSION"

// The test binary is bmx when BMX_TEST_AS_BMX is set, or when it runs under
// the name bmx (testscript installs it so for the scripts): sweeps started
// by the tests launch it as {self} to run sim-server, exactly as the real
// binary launches itself. Every process the tests start from it is bmx.
//
// A server's supervisor is the test binary re-executed too, whatever the
// environment says.
//
// The test binary is stamped with no commit, so bmx's Version asks git
// (twice) in every process that needs it: the tests ask once, here, and
// hand the answer to the bmx processes they start (testVersion), which
// would each ask the same git of the same tree.
func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(testVersion); ok {
		Version = func() string { return v }
	}
	switch {
	case len(os.Args) > 1 && os.Args[1] == server.SuperviseArg:
		os.Exit(server.Supervise(os.Args[2:]))
	case os.Getenv(endlessServer) != "" && len(os.Args) > 1 && os.Args[1] == "sim-server":
		os.Exit(serveEndless(os.Getenv(endlessServer), os.Args[2:]))
	case os.Getenv(asBMX) == "1" || filepath.Base(os.Args[0]) == "bmx":
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv(asBMX, "1")
	os.Setenv(testVersion, Version())
	moreParallel()
	testscript.Main(cleanupM{m}, map[string]func(){"bmx": func() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) }})
}

// cleanupM runs the tests, then removes what they shared (testscript.Main
// exits when they are done).
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	defer removeSwept()
	return c.m.Run()
}

// sweptOnce is the run of twoCells that sweptRun copies: swept once, by a
// real bmx, for every test that takes a finished run and changes it.
var sweptOnce struct {
	once         sync.Once
	root, run    string
	code         int
	stderr, fail string
}

// removeSwept removes sweptOnce's folder, when the tests are done.
func removeSwept() {
	if sweptOnce.root != "" {
		os.RemoveAll(sweptOnce.root)
	}
}

// parallelTests is how many parallel tests run at once unless -parallel
// says otherwise. The sweep tests wait (on servers' start-ups, ready
// timeouts and SIGTERM graces) far more than they compute, so more of them
// run at once than there are CPUs, the default.
const parallelTests = 6

func moreParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(parallelTests, runtime.GOMAXPROCS(0))))
	}
}

// bmx runs bmx in this process.
func bmx(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// runBMX runs this test binary as a real bmx process and returns its exit
// status and output.
func runBMX(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runBMXEnv(t, nil, args...)
}

// runBMXEnv is runBMX with env ("KEY=value") added to the environment.
func runBMXEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run bmx: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestScripts runs the end-to-end scripts of testdata/script: bmx (this test
// binary, installed as bmx) as a real process in a working directory of
// each script's own. exits N cmd args... runs a command that must exit
// with status N: bmx's exit codes are part of its interface; fastbuiltin
// NAME writes NAME.toml, the built-in config on a faster clock.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": exits, "fastbuiltin": fastBuiltinCmd},
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv(testVersion, os.Getenv(testVersion))
			return nil
		},
	})
}

// fastBuiltinCmd is the scripts' fastbuiltin NAME: NAME.toml in the
// script's directory, the built-in config on its profile's faster clock
// (fastBuiltin).
func fastBuiltinCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fastbuiltin name")
	}
	if _, err := writeFastBuiltin(ts.MkAbs("."), args[0], ""); err != nil {
		ts.Fatalf("fastbuiltin: %v", err)
	}
}

func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits status command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits %q: not a status", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

func runDir(t *testing.T, out string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(out, "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one run directory in %s, got %v (%v)", out, dirs, err)
	}
	return dirs[0]
}

// TestSweepBuiltin is the end-to-end test: the built-in simulated SM120 host
// swept through the real launcher, real sim-server processes and real HTTP.
// The table it prints fits the width of a pipe, and its report fits others
// (checkTableFits). It sweeps on 3 slots (the cells mostly wait: on the
// hang's ready timeout, the servers' start-ups); the reference still runs
// first, and the verdicts are those of one slot.
func TestSweepBuiltin(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code, stdout, stderr := bmx(t, "sweep", "--out", out, "--slots", "3")
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dir := runDir(t, out)
	for _, f := range []string{"run.json", "results.jsonl", "report.md", "report.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Run    record.Run        `json:"run"`
		Cells  []record.Result   `json:"cells"`
		Known  map[string]string `json:"known_status"`
		Causes []reports.Cluster `json:"causes"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]classify.Verdict{}
	for _, moe := range []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl"} {
		for _, fp4 := range []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm"} {
			v := classify.Crash // trtllm MoE kernels are SM100-only, and so is the trtllm FP4 GEMM
			switch {
			case fp4 == "flashinfer_trtllm" || moe == "flashinfer_trtllm":
			case moe == "flashinfer_cutedsl" && fp4 == "flashinfer_cutedsl":
				v = classify.Degraded // the answers pass, the logprobs drift
			case moe == "flashinfer_cutedsl":
				v = classify.Garbage
			case fp4 == "flashinfer_cudnn":
				v = classify.Correct
			case fp4 == "flashinfer_cutlass":
				v = classify.NaN
			case fp4 == "flashinfer_cutedsl":
				v = classify.Hang
			}
			want["moe_runner="+moe+",fp4_gemm="+fp4] = v
		}
	}
	if len(rep.Cells) != len(want) {
		t.Fatalf("%d cells, want %d", len(rep.Cells), len(want))
	}
	for _, c := range rep.Cells {
		if c.Verdict != want[c.Cell.ID] {
			t.Errorf("%s: %s (%s), want %s", c.Cell.ID, c.Verdict, c.Reason, want[c.Cell.ID])
		}
		if _, err := os.Stat(c.LogPath); err != nil {
			t.Errorf("%s: log: %v", c.Cell.ID, err)
		}
		switch c.Verdict {
		case classify.Crash, classify.NaN, classify.Hang:
			if c.Signature == "" {
				t.Errorf("%s: %s without a signature", c.Cell.ID, c.Verdict)
			}
		}
	}
	// The story's fourth probe: in thinking mode the answer is in content,
	// the reasoning in reasoning_content, and the cell is correct.
	for _, c := range rep.Cells {
		if c.Cell.ID != "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn" {
			continue
		}
		found := false
		for _, o := range c.Observations {
			if o.Probe == "math-thinking" {
				found = true
				if !strings.Contains(o.Text, "323") || o.Reasoning == "" || strings.Contains(o.Text, "<think>") {
					t.Errorf("thinking probe: text %q reasoning %q", o.Text, o.Reasoning)
				}
			}
		}
		if !found {
			t.Error("no math-thinking observation")
		}
		if c.Resolved["moe_runner_backend"] != "flashinfer_cutlass" {
			t.Errorf("resolved %v", c.Resolved)
		}
	}
	first := strings.SplitN(string(mustRead(t, filepath.Join(dir, "results.jsonl"))), "\n", 2)[0]
	if !strings.Contains(first, `"id":"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"`) {
		t.Errorf("the reference cell did not run first: %.200s", first)
	}
	if rep.Known["moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass"] != "XFAIL https://github.com/sgl-project/sglang/issues/20043" ||
		rep.Known["moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn"] != "UNEXPECTED" {
		t.Errorf("known statuses %v", rep.Known)
	}
	if len(rep.Causes) != 5 || len(rep.Causes[0].Cells) != 4 {
		t.Errorf("causes %+v", rep.Causes)
	}
	if !rep.Run.Simulated || len(rep.Run.Axes) != 2 {
		t.Errorf("run.json: simulated %v axes %v", rep.Run.Simulated, rep.Run.Axes)
	}
	for _, s := range []string{"SIMULATED", "moe_runner \\ fp4_gemm", "12 cells: 1 correct, 1 degraded, 2 garbage, 1 nan, 1 hang, 6 crash"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	results, err := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	if err != nil || bytes.Count(results, []byte("\n")) != 12 {
		t.Errorf("results.jsonl: %d lines (%v)", bytes.Count(results, []byte("\n")), err)
	}
	if leftovers := simProcesses(t, out); len(leftovers) > 0 {
		t.Errorf("sim servers outlived the sweep: %v", leftovers)
	}
	loaded, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkTableFits(t, stdout, loaded)
}

// simProcesses lists the running sim-servers started from this test binary
// for the runs under out: their marker (server.MarkerEnv) names a run
// directory there. Other tests' servers, which may run meanwhile, are not
// listed.
func simProcesses(t *testing.T, out string) []string {
	t.Helper()
	self, _ := os.Executable()
	marker := []byte(server.MarkerEnv + "=" + server.RunMarker(out) + string(filepath.Separator))
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 2 || args[0] != self || args[1] != "sim-server" {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, marker) {
				found = append(found, p)
			}
		}
	}
	return found
}

// TestFailOn: --fail-on crash,nan fails a sweep of one correct cell and
// one crash (twoCells, one probe) on the crash alone.
func TestFailOn(t *testing.T) {
	t.Parallel()
	code, _, stderr := bmx(t, "sweep", "-c", twoCellsIn(t, t.TempDir(), "failon", oneProbe), "--out", t.TempDir(), "-q", "--fail-on", "crash,nan")
	if code != ExitFailed || !strings.Contains(stderr, "bmx: --fail-on crash,nan: 1 of 2 cells failed the gate\nbmx:   cells by kind: 1 crash\n") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := bmx(t, "sweep", "--fail-on", "broken"); code != ExitUsage || !strings.Contains(stderr, `--fail-on "broken": not a verdict`) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	code, stdout, _ := bmx(t, "plan")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout, "sim-sm120: 12 cells") || strings.Count(stdout, "argv: ") != 12 ||
		!strings.Contains(stdout, "sim-server --model-path simulated/Qwen3.5-397B-A17B-NVFP4") ||
		!strings.Contains(stdout, "--port {port}") || !strings.Contains(stdout, "--moe-runner-backend flashinfer_cutedsl --fp4-gemm-backend flashinfer_trtllm") {
		t.Errorf("plan:\n%s", stdout)
	}
	code, stdout, _ = bmx(t, "plan", "--only", "fp4_gemm=flashinfer_cudnn", "--var", "model=/models/x")
	if code != ExitOK || strings.Count(stdout, "argv: ") != 3 || !strings.Contains(stdout, "--model-path /models/x") {
		t.Errorf("exit %d plan:\n%s", code, stdout)
	}
}

// TestPlanShapeOnlyWarnings: plan warns, one line a probe, about probes
// that can only be judged by the shape of their text.
func TestPlanShapeOnlyWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "probes.toml"), []byte(`[[probe]]
name = "story"
prompt = "Once upon a time"
[[probe]]
name = "sea"
prompt = "Write about the sea."
temperature = 0.8
[[probe]]
name = "ok"
prompt = "Say 'OK'"
expect = { contains = "OK" }
`), 0o644)
	base := "[server]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[probes]\nfile = \"probes.toml\"\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\", \"y\"]\n"
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"no reference", "", []string{
			"bmx: warning: probe story has no expect and the config no reference cell: it is judged by the shape of its text only",
			"bmx: warning: probe sea is sampled (temperature 0.8) and has no expect: it is judged by the shape of its text only",
		}},
		{"reference", "reference = { a = \"x\" }\n", []string{
			"bmx: warning: probe sea is sampled (temperature 0.8) and has no expect: it is judged by the shape of its text only",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "m.toml")
			os.WriteFile(path, []byte(tc.extra+base), 0o644)
			code, _, stderr := bmx(t, "plan", "-c", path)
			if code != ExitOK {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if d := cmp.Diff(tc.want, strings.Split(strings.TrimSpace(stderr), "\n")); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.toml")
	os.WriteFile(path, []byte("[server]\ncommand = [\"srv\", \"{model}\"]\nready_timeout = \"soon\"\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\"]\n[[exclude]]\na = \"nope\"\n"), 0o644)
	code, stdout, stderr := bmx(t, "sweep", "-c", path, "--out", filepath.Join(dir, "runs"))
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{path + ":2: server.command: undefined placeholder {model}", path + ":3: server.ready_timeout: malformed duration \"soon\""} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("stdout: %s", stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); !os.IsNotExist(err) {
		t.Error("a bad config created a run directory")
	}
	code, _, stderr = bmx(t, "plan", "-c", filepath.Join(dir, "missing.toml"))
	if code != ExitUsage || !strings.Contains(stderr, "missing.toml") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = bmx(t, "plan", "--var", "novalue")
	if code != ExitUsage || !strings.Contains(stderr, `--var "novalue": want name=value`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
	os.WriteFile(path, []byte("[server]\ncommand = [\"srv\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\"]\n[[exclude]]\na = \"nope\"\n"), 0o644)
	code, _, stderr = bmx(t, "plan", "-c", path)
	if code != ExitOK || !strings.Contains(stderr, "warning: "+path+": exclude #1 {a=nope} matches no cell") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestSimServerProcess runs `bmx sim-server` as a real process with a bad
// choice: argparse's message and exit status 2.
func TestSimServerProcess(t *testing.T) {
	t.Parallel()
	self, _ := os.Executable()
	cmd := exec.Command(self, "sim-server", "--model-path", "m", "--moe-runner-backend", "cutlass_v2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(stderr.String(), "sglang serve: error: argument --moe-runner-backend: invalid choice: 'cutlass_v2'") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestProbeCommand(t *testing.T) {
	t.Parallel()
	serve := func(moe string) string {
		s := sim.New(sim.Options{ModelPath: "/m", MoERunner: moe, FP4Gemm: "flashinfer_cudnn", ReasoningParser: "qwen3", TP: 1}, sim.DefaultProfile(), &bytes.Buffer{})
		s.SetReady()
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	code, stdout, stderr := bmx(t, "probe", "--url", serve("flashinfer_cutlass"))
	if code != ExitOK || !strings.Contains(stdout, "correct") || !strings.Contains(stdout, "math-thinking") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = bmx(t, "probe", "--url", serve("flashinfer_cutedsl"), "--json")
	var j struct {
		Verdict string `json:"verdict"`
	}
	if code != ExitFailed || json.Unmarshal([]byte(stdout), &j) != nil || j.Verdict != "garbage" {
		t.Errorf("exit %d verdict %q", code, j.Verdict)
	}
	if code, _, _ := bmx(t, "probe"); code != ExitUsage {
		t.Errorf("probe without --url: exit %d", code)
	}
}

func TestPreflightExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := matrixtest.Config{
		Server: matrixtest.Server{Command: []string{"/opt/sglang/bin/no-such-python", "--port", "{port}"}},
		Axes:   []matrixtest.Axis{{Name: "a", Flag: "--a", Values: []string{"x"}}},
	}.Write(t, filepath.Join(dir, "m.toml"))
	code, _, stderr := bmx(t, "sweep", "-c", path, "--out", filepath.Join(dir, "runs"))
	if code != ExitUsage || !strings.Contains(stderr, `bmx: preflight: server executable "/opt/sglang/bin/no-such-python"`) {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dir, "runs"))
		if len(entries) > 0 {
			t.Error("preflight failure left a run directory")
		}
	}
}

func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		n++
	}
	return n
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	if code, stdout, _ := bmx(t, "version"); code != 0 || !strings.HasPrefix(stdout, "bmx ") {
		t.Errorf("version: %d %q", code, stdout)
	}
	if code, _, stderr := bmx(t, "swep"); code != ExitUsage || !strings.Contains(stderr, "unknown command") {
		t.Errorf("unknown command: %d %q", code, stderr)
	}
	if code, stdout, _ := bmx(t, "--help"); code != 0 || !strings.Contains(stdout, "130  interrupted") {
		t.Errorf("help should list exit codes: %d\n%s", code, stdout)
	}
}

func TestClassifyCommand(t *testing.T) {
	t.Parallel()
	corpus := testenv.Shared(t, "corpus", "dev.jsonl")
	code, stdout, stderr := bmx(t, "classify", "--cases", corpus, "--score")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, l := range lines {
		var v struct{ ID, Verdict, Signature, Reason string }
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.ID == "" || v.Verdict == "" || v.Reason == "" {
			t.Errorf("bad line %q: %v", l, err)
		}
	}
	if countLines(corpus) != len(lines) {
		t.Errorf("%d verdicts for %d cases", len(lines), countLines(corpus))
	}
	if !strings.Contains(stderr, "accuracy: ") || !strings.Contains(stderr, "failures judged correct: 0") || !strings.Contains(stderr, `label \ verdict`) {
		t.Errorf("score:\n%s", stderr)
	}

	// A failure judged correct fails the score; a bad line is named and the
	// rest is still judged.
	cases := filepath.Join(t.TempDir(), "cases.jsonl")
	os.WriteFile(cases, []byte(`{"id":"a","label":"crash","log":"","exit":null,"timed_out":false,"probes":[]}
not json
{"id":"b","label":"garbage","log":"","exit":null,"timed_out":false,"probes":[{"name":"p","text":"!!!!!!!!!!!!","http_status":200}]}
`), 0o644)
	code, stdout, stderr = bmx(t, "classify", "--cases", cases, "--score")
	if code != ExitUsage || !strings.Contains(stderr, cases+":2:") || strings.Count(stdout, "\n") != 2 {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	os.WriteFile(cases, []byte(`{"id":"a","label":"crash","log":"","exit":null,"timed_out":false,"probes":[]}`+"\n"), 0o644)
	if code, _, stderr := bmx(t, "classify", "--cases", cases, "--score"); code != ExitFailed || !strings.Contains(stderr, "judged correct although labelled as failures: a") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

// TestClassifyShapeOnly: a case judged correct by its text's shape alone
// prints "shape_only": true and says so in its reason; one whose
// expectation was met, or that failed, prints no shape_only.
func TestClassifyShapeOnly(t *testing.T) {
	t.Parallel()
	cases := filepath.Join(t.TempDir(), "cases.jsonl")
	os.WriteFile(cases, []byte(`{"id":"story","log":"","exit":null,"probes":[{"name":"story","prompt":"Tell a story.","expect":null,"text":"Once upon a time, a fox lived in the woods.","http_status":200}]}
{"id":"ok","log":"","exit":null,"probes":[{"name":"say-ok","prompt":"Say 'OK'","expect":{"contains":"OK"},"text":"OK","http_status":200}]}
{"id":"log-only","log":"INFO server ready","exit":null,"probes":[]}
{"id":"broken","log":"","exit":null,"probes":[{"name":"story","prompt":"Tell a story.","expect":null,"text":"1.\n2.\n3.\n4.\n5.","finish_reason":"length","http_status":200}]}
`), 0o644)
	code, stdout, stderr := bmx(t, "classify", "--cases", cases)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := map[string]bool{"story": true, "ok": false, "log-only": true, "broken": false}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var v struct {
			ID, Verdict, Reason string
			ShapeOnly           *bool `json:"shape_only"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		shape, seen := want[v.ID]
		if !seen {
			t.Fatalf("unexpected case %q", v.ID)
		}
		delete(want, v.ID)
		switch {
		case shape && (v.ShapeOnly == nil || !*v.ShapeOnly || v.Verdict != "correct" || !strings.Contains(v.Reason, "shape only")):
			t.Errorf("%s: want correct, shape_only true and a reason that says so: %s", v.ID, l)
		case !shape && v.ShapeOnly != nil:
			t.Errorf("%s: want no shape_only: %s", v.ID, l)
		}
	}
	if len(want) > 0 {
		t.Errorf("no verdict for %v", want)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
