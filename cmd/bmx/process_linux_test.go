//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// The tests in this file signal real processes (sweeps need Linux).

// TestBmxKilledLeavesNoServer: even SIGKILL of bmx, which runs no cleanup,
// takes its server down (Pdeathsig).
func TestBmxKilledLeavesNoServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	self, _ := os.Executable()
	cmd := exec.Command(self, "sweep", "--out", dir, "-q", "--only", "moe_runner=flashinfer_cutlass", "--only", "fp4_gemm=flashinfer_cutedsl")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until the hanging sim server is up, then kill bmx outright.
	deadline := time.Now().Add(20 * time.Second)
	for len(simProcesses(t, dir)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(simProcesses(t, dir)) == 0 {
		cmd.Process.Kill()
		t.Fatal("the sim server never started")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	deadline = time.Now().Add(5 * time.Second)
	for len(simProcesses(t, dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := simProcesses(t, dir); len(left) > 0 {
		server.KillMarked("")
		t.Errorf("servers outlived a SIGKILLed bmx: %v", left)
	}
}

// waitHanging waits until the hanging server of the run in dir is stuck in
// graph capture, where it ignores SIGTERM: a SIGTERM that arrived before it
// got there would end it at once.
func waitHanging(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
		for _, l := range logs {
			if data, _ := os.ReadFile(l); bytes.Contains(data, []byte("Capture cuda graph begin")) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the hanging server never reached graph capture")
}

// startBMX runs this test binary as a real bmx process; the channel gets its
// exit status.
func startBMX(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, <-chan int) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		done <- cmd.ProcessState.ExitCode()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return cmd, &stderr, done
}

// waitResults waits until the one run directory under out has n results.
func waitResults(t *testing.T, out string, n int, stderr *bytes.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if runs, _ := filepath.Glob(filepath.Join(out, "*", "results.jsonl")); len(runs) == 1 && countLines(runs[0]) >= n {
			return runs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %d results within 30 s; stderr:\n%s", n, stderr)
	return ""
}

// interruptConfig: three crash cells, then a cell that hangs in graph
// capture and ignores SIGTERM, on the SM120 profile's faster clock (a
// start-up of 50 ms, not 700); ready and grace are its ready_timeout and
// stop_grace.
func interruptConfig(t *testing.T, name, ready, grace string) string {
	dir := t.TempDir()
	prof := matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	return matrixtest.Config{Name: name,
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", prof}, ReadyTimeout: ready, StopGrace: grace},
		Axes: []matrixtest.Axis{
			{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_trtllm"}},
			{Name: "fp4", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass"}},
		},
		Tail: "[[include]]\nmoe = \"flashinfer_cutlass\"\nfp4 = \"flashinfer_cutedsl\"\n",
	}.Write(t, filepath.Join(dir, "m.toml"))
}

// TestSignalStopsSweep sends SIGINT to a real bmx process while a server
// hangs: bmx tears it down, keeps the finished cells and exits 130 through
// Main's one exit path. A second signal kills the server at once instead of
// waiting out its SIGTERM grace (here two minutes).
func TestSignalStopsSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		grace   string
		signals int
	}{
		{"one signal", "500ms", 1},
		{"second signal kills at once", "2m", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "runs")
			cmd, stderr, done := startBMX(t, "sweep", "-c", interruptConfig(t, "signal", "2m", tc.grace), "--out", out, "-q")
			results := waitResults(t, out, 3, stderr)
			waitHanging(t, filepath.Dir(results))
			cmd.Process.Signal(syscall.SIGINT)
			if tc.signals == 2 {
				select {
				case code := <-done:
					t.Fatalf("exit %d before the second signal: the grace was not waited for\n%s", code, stderr)
				case <-time.After(time.Second):
				}
				cmd.Process.Signal(syscall.SIGINT)
			}
			select {
			case code := <-done:
				if code != ExitInterrupted {
					t.Errorf("exit %d, want 130\n%s", code, stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("bmx did not exit after the signal\n%s", stderr)
			}
			if n := countLines(results); n != 3 {
				t.Errorf("%d results kept, want 3", n)
			}
			dir := filepath.Dir(results)
			if run, err := record.ReadRun(dir); err != nil || !run.Interrupted {
				t.Errorf("run.json: %+v %v", run, err)
			}
			if !strings.Contains(stderr.String(), "interrupted: 3 of 4 cells are done") || !strings.Contains(stderr.String(), "bmx sweep --resume "+dir) {
				t.Errorf("stderr:\n%s", stderr)
			}
			if left := simProcesses(t, dir); len(left) > 0 {
				t.Errorf("servers outlived bmx: %v", left)
			}
			if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(dir))); n != 0 {
				t.Errorf("%d processes with the run's marker outlived bmx", n)
			}
		})
	}
}

// TestNothingSurvivesBmx signals a real bmx while its server's tree holds a
// child that ignores SIGTERM, a setsid grandchild and a setsid grandchild
// with a cleared environment (no marker to find it by): after SIGKILL,
// SIGINT or SIGTERM of bmx, none of them is left. The three run at once,
// each its own tree.
func TestNothingSurvivesBmx(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"sh", "setsid", "env", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			needs(t, tool+" (util-linux, coreutils)")
		}
	}
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(signalName(sig), func(t *testing.T) {
			t.Parallel()
			// Each process of the tree sleeps a number no other process
			// uses, so they are found by it alone.
			token := fmt.Sprintf("%d%d", 7_300_000+os.Getpid()%100_000*10, i)
			path := filepath.Join(t.TempDir(), "m.toml")
			os.WriteFile(path, []byte(`name = "tree"
[server]
command = ["sh", "-c", "trap '' TERM; (trap '' TERM; exec sleep `+token+`1) & setsid sleep `+token+`2 & setsid env -i sleep `+token+`3 & wait", "{port}"]
ready_timeout = "5m"
stop_grace = "1s"
[[axis]]
name = "a"
flag = "--a"
values = ["x"]
`), 0o644)
			cmd, stderr, done := startBMX(t, "sweep", "-c", path, "--out", t.TempDir(), "-q")
			deadline := time.Now().Add(20 * time.Second)
			for len(withToken(token)) < 4 && time.Now().Before(deadline) { // sh, three sleeps
				time.Sleep(20 * time.Millisecond)
			}
			if n := len(withToken(token)); n < 4 {
				t.Fatalf("the server's tree never came up (%d processes)\n%s", n, stderr)
			}
			// bmx's supervisors (the server's, and a spare if one waits)
			// must go with it too.
			supervisors := childrenWith(cmd.Process.Pid, "__supervise")
			if len(supervisors) == 0 {
				t.Fatalf("no supervisor among bmx's children\n%s", stderr)
			}
			token += "|" + strings.Join(supervisors, "|")
			cmd.Process.Signal(sig)
			code := <-done
			if sig != syscall.SIGKILL && code != ExitInterrupted {
				t.Errorf("exit %d after %s, want 130\n%s", code, signalName(sig), stderr)
			}
			deadline = time.Now().Add(5 * time.Second)
			for len(withToken(token)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := withToken(token); len(left) > 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("%d processes outlived %s of bmx: %v", len(left), signalName(sig), left)
			}
		})
	}
}

// withToken lists the live processes whose command line holds token, or
// whose PID is one of those listed after it ("token|pid|pid").
func withToken(token string) []int {
	token, pidList, _ := strings.Cut(token, "|")
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		listed := slices.Contains(strings.Split(pidList, "|"), filepath.Base(filepath.Dir(p)))
		if err != nil || (!bytes.Contains(b, []byte(token)) && !listed) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil || bytes.Contains(stat[bytes.LastIndexByte(stat, ')'):], []byte(") Z")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

// childrenWith lists the PIDs of parent's live children whose command line
// holds arg.
func childrenWith(parent int, arg string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if bytes.Contains(cmdline, []byte(arg)) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// needs skips a test for a missing tool, and fails it in CI, where every
// tool the tests use must be installed.
func needs(t *testing.T, what string) {
	t.Helper()
	testenv.Skip(t, "needs %s", what)
}

// TestSecondBmxRefused runs a second bmx on a run another bmx is sweeping:
// sweep --resume is refused in one line naming the first one's PID (exit 3)
// while the first one's server hangs in graph capture, and the first sweeps
// on unharmed: its server is judged a hang (not a crash from being killed
// by the second), and results.jsonl ends with one line per cell.
func TestSecondBmxRefused(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "runs")
	cmd, stderr, done := startBMX(t, "sweep", "-c", interruptConfig(t, "locked", "4s", "500ms"), "--out", out, "-q")
	results := waitResults(t, out, 3, stderr)
	dir := filepath.Dir(results)
	waitHanging(t, dir)
	code, stdout, errOut := runBMX(t, "sweep", "--resume", dir, "-q")
	want := fmt.Sprintf("bmx: --resume: %s is in use by another bmx (PID %d): one bmx at a time writes into a run directory\n", dir, cmd.Process.Pid)
	if code != ExitInfra || errOut != want || stdout != "" {
		t.Errorf("second bmx: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, errOut, ExitInfra, want)
	}
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("the first bmx exited %d\n%s", code, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the first bmx did not end\n%s", stderr)
	}
	f, err := os.Open(results)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, torn, err := record.ReadResults(f)
	if err != nil || torn || len(rs) != 4 {
		t.Fatalf("%d results (torn %v, %v), want 4", len(rs), torn, err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Cell.ID] {
			t.Errorf("%s recorded twice", r.Cell.ID)
		}
		seen[r.Cell.ID] = true
	}
	if last := rs[3]; last.Verdict != classify.Hang {
		t.Errorf("the hanging cell %s: %s (%s), want hang", last.Cell.ID, last.Verdict, last.Reason)
	}
}
