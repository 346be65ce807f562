package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/record"
)

// The tests in this file run bmx as a real process, in a working directory of
// their own, on configs whose setup is broken.

// runBMXIn runs this test binary as a real bmx process in dir ("": the
// current directory).
func runBMXIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BMX_TEST_AS_BMX=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run bmx: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// loaderConfig is a 2x2 matrix whose server reads {model}/config.json, as a
// real server loads its model, before it starts the simulated server.
func loaderConfig(t *testing.T, dir, model, extra string) string {
	t.Helper()
	src := `name = "loader"
` + extra + `
[vars]
model = "` + model + `"
[server]
command = ["sh", "-c", 's=$1; m=$2; shift 2; cat "$m/config.json" >/dev/null && exec "$s" sim-server --model-path "$m" "$@"',
  "sh", "{self}", "{model}", "--host", "{host}", "--port", "{port}"]
ready_timeout = "10s"
stop_grace = "1s"
ready_log = "fired up and ready to roll"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "triton"]
[[axis]]
name = "fp4_gemm"
flag = "--fp4-gemm-backend"
values = ["flashinfer_cudnn", "flashinfer_cutlass"]
`
	path := filepath.Join(dir, "loader.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stderrLines are the lines of stderr that contain s.
func stderrLines(stderr, s string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestMissingModelStopsAfterFirstCell: a model path the preflight cannot tell
// from a Hugging Face id ("models/x" with no ./models here) is missing; the
// first cell's server fails to load it, and the sweep stops there with exit 3
// and one message naming the cause and the cell's log, keeping the cell and
// writing the reports. --keep-going runs every cell; with the model present
// every cell runs and bmx exits 0.
func TestMissingModelStopsAfterFirstCell(t *testing.T) {
	dir := t.TempDir()
	cfg := loaderConfig(t, dir, "models/qwen3-missing", "")
	code, stdout, stderr := runBMXIn(t, dir, "sweep", "-q", "-c", cfg, "--out", "runs")
	if code != ExitInfra {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitInfra, stdout, stderr)
	}
	msgs := stderrLines(stderr, "the setup is broken")
	if len(msgs) != 1 {
		t.Fatalf("want one message about the setup, got %d:\n%s", len(msgs), stderr)
	}
	run := runDir(t, filepath.Join(dir, "runs"))
	log := filepath.Join("runs", filepath.Base(run), "logs", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn.log")
	want := "bmx: stopped after the first cell (moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn): the setup is broken, not a backend: " +
		"the model cannot be found or loaded: cat: models/qwen3-missing/config.json: No such file or directory (see " + log + "); fix it or pass --keep-going"
	if msgs[0] != want {
		t.Errorf("message:\n%s\nwant:\n%s", msgs[0], want)
	}
	var others []string // besides the run's start line and notes
	for _, l := range stderrLines(stderr, "bmx: ") {
		if !strings.HasPrefix(l, "bmx: sweeping ") && !strings.HasPrefix(l, "bmx: note: ") {
			others = append(others, l)
		}
	}
	if len(others) != 1 {
		t.Errorf("want one message, got:\n%s", stderr)
	}
	if n := countLines(filepath.Join(run, record.ResultsFile)); n != 1 {
		t.Errorf("%d results recorded, want the first cell's only", n)
	}
	rep, err := record.Load(run)
	if err != nil {
		t.Fatalf("the reports of a stopped run: %v", err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Verdict != "crash" {
		t.Errorf("results: %+v", rep.Results)
	}
	if !strings.Contains(strings.Join(rep.Run.Notes, "\n"), "the setup is broken") {
		t.Errorf("run.json notes do not say why the run stopped: %q", rep.Run.Notes)
	}
	for _, f := range []string{"report.md", "report.json"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("report not written: %v", err)
		}
	}

	t.Run("keep going", func(t *testing.T) {
		code, stdout, stderr := runBMXIn(t, dir, "sweep", "-q", "-c", cfg, "--out", "runs-kept", "--keep-going")
		if code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if n := countLines(filepath.Join(runDir(t, filepath.Join(dir, "runs-kept")), record.ResultsFile)); n != 4 {
			t.Errorf("%d results with --keep-going, want 4", n)
		}
	})
	t.Run("model present", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Join(dir, "models", "qwen3"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "models", "qwen3", "config.json"), []byte("{}"), 0o644)
		ok := loaderConfig(t, dir, "models/qwen3", "")
		code, stdout, stderr := runBMXIn(t, dir, "sweep", "-q", "-c", ok, "--out", "runs-ok")
		if code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if n := countLines(filepath.Join(runDir(t, filepath.Join(dir, "runs-ok")), record.ResultsFile)); n != 4 {
			t.Errorf("%d results, want 4", n)
		}
	})
}

// TestMissingModelRefused: a model path that looks local and does not exist
// is refused before any server starts, by sweep (exit 2, no run directory)
// and by plan --check, in one line naming the var, its value and the config
// file; plain plan warns of it in the same words.
func TestMissingModelRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := loaderConfig(t, dir, "./models/qwen3-missing", "")
	want := `bmx: preflight: ` + cfg + `:4: vars.model: "./models/qwen3-missing" does not exist (the server is told to load it): fix the path or pass --var model=PATH`
	code, stdout, stderr := runBMXIn(t, dir, "sweep", "-q", "-c", cfg, "--out", "runs")
	if code != ExitUsage || strings.TrimSpace(stderr) != want {
		t.Errorf("sweep: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		if entries, _ := os.ReadDir(filepath.Join(dir, "runs")); len(entries) > 0 {
			t.Errorf("a refused config left a run directory: %v", entries)
		}
	}
	code, stdout, stderr = runBMXIn(t, dir, "plan", "-c", cfg, "--check")
	if pre := stderrLines(stderr, "bmx: preflight: "); code != ExitUsage || len(pre) != 1 || pre[0] != want || !strings.Contains(stdout, "loader: 4 cells") {
		t.Errorf("plan --check: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	code, stdout, stderr = runBMXIn(t, dir, "plan", "-c", cfg)
	if warn := strings.Replace(want, "bmx: ", "bmx: warning: ", 1); code != ExitOK || strings.TrimSpace(stderr) != warn {
		t.Errorf("plan: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, warn)
	}
}

// TestPlanCheck: an axis value the installed server does not accept is caught
// by bmx plan --check (or help_check = true), from the server's own --help,
// with the file and the axis; without either, plan does not run the server.
func TestPlanCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.toml")
	os.WriteFile(path, []byte(`engine = "sim"
[vars]
model = "m"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutlas"]
`), 0o644)
	code, stdout, stderr := runBMXIn(t, dir, "plan", "-c", path, "--check")
	want := `bmx: help_check: ` + path + `: axis moe_runner: --moe-runner-backend "flashinfer_cutlas" is not a choice of the installed server (valid: auto, deep_gemm,`
	if code != ExitUsage || !strings.HasPrefix(stderr, want) || len(stderrLines(stderr, "bmx: ")) != 1 {
		t.Errorf("plan --check: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runBMXIn(t, dir, "plan", "-c", path); code != ExitOK {
		t.Errorf("plan without --check: exit %d\n%s", code, stderr)
	}
	os.WriteFile(path, append([]byte("help_check = true\n"), mustRead(t, path)...), 0o644)
	if code, _, stderr := runBMXIn(t, dir, "plan", "-c", path); code != ExitUsage || !strings.Contains(stderr, `"flashinfer_cutlas" is not a choice`) {
		t.Errorf("plan with help_check = true: exit %d\n%s", code, stderr)
	}
	os.WriteFile(path, bytes.Replace(mustRead(t, path), []byte(`"flashinfer_cutlas"`), []byte(`"triton"`), 1), 0o644)
	if code, _, stderr := runBMXIn(t, dir, "plan", "-c", path, "--check"); code != ExitOK {
		t.Errorf("plan --check of good values: exit %d\n%s", code, stderr)
	}
}
