package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// The tests of issue 39 points 1, 2, 4, 8 and 9, each through real bmx
// processes: nothing outside the run directory is written, and bmx's own
// failures are never recorded as a server's crash.

// TestResumeRefusesLinks plants a symbolic link where a resume writes (the
// lock, the log of a cell left to run, results.jsonl): the resume is refused
// in one line, exit 3, and the file the link points to is untouched (issue
// 39 point 1: the lock's target was emptied, the log's overwritten).
func TestResumeRefusesLinks(t *testing.T) {
	t.Parallel()
	for _, name := range []string{record.LockFile, "log", record.ResultsFile} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := sweptRun(t)
			rs := readResults(t, dir)
			// One cell left to run: its log is written by the resume.
			var keep bytes.Buffer
			json.NewEncoder(&keep).Encode(rs[0])
			if err := os.WriteFile(filepath.Join(dir, record.ResultsFile), keep.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(t.TempDir(), "precious.txt")
			if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, name)
			if name == "log" {
				link = filepath.Join(dir, "logs", record.LogName(rs[1].Cell, 1))
			}
			if name == record.ResultsFile {
				if err := os.WriteFile(victim, keep.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(victim)
			os.Remove(link)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runBMX(t, "sweep", "--resume", dir, "-q")
			want := fmt.Sprintf("bmx: --resume: %s is a symbolic link (to %s) where bmx writes a file: bmx does not write through links; remove it, or start a new run\n", link, victim)
			if code != ExitInfra || stderr != want || stdout != "" {
				t.Errorf("resume: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, ExitInfra, want)
			}
			if after, _ := os.ReadFile(victim); !bytes.Equal(after, before) {
				t.Errorf("the link's target was written: %q, was %q", after, before)
			}
		})
	}
}

// TestOutOfFilesIsNotACrash sweeps with ulimit -n 16 and 2 slots: bmx
// runs out of file descriptors (for its supervisor, a probe's socket, or
// sooner, as the descriptors its start holds vary), which is its own
// failure: no cell is recorded (the correct one read as a crash before),
// and the sweep exits 3 saying why (issue 39 point 2). A resume runs the
// cells again: see TestSupervisorKilledIsNotACrash.
func TestOutOfFilesIsNotACrash(t *testing.T) {
	t.Parallel()
	for _, limit := range []string{"16", "24"} {
		t.Run("ulimit -n "+limit, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "runs")
			self, _ := os.Executable()
			cmd := exec.Command("sh", "-c", `ulimit -n `+limit+` && exec "$0" "$@"`, self, "sweep", "-c", twoCells(t, "fds"), "--out", out, "--slots", "2", "-q")
			cmd.Env = append(os.Environ(), asBMX+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != ExitInfra || !strings.Contains(stderr.String(), "too many open files") {
				t.Fatalf("sweep under ulimit -n %s: exit %d, want %d and the cause named\n%s", limit, code, ExitInfra, stderr.String())
			}
			runs, _ := filepath.Glob(filepath.Join(out, "*"))
			for _, dir := range runs {
				if _, err := os.Stat(filepath.Join(dir, record.ResultsFile)); errors.Is(err, fs.ErrNotExist) {
					continue // out of descriptors before its first result: nothing recorded
				}
				for _, r := range readResults(t, dir) {
					if r.Cell.ID == "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn" || r.Verdict != classify.Crash || strings.Contains(r.Reason+strings.Join(r.Problems, " "), "too many open files") {
						t.Errorf("%s recorded as %s (%s): bmx's own failure is no verdict", r.Cell.ID, r.Verdict, r.Reason)
					}
				}
			}
		})
	}
}

// TestSupervisorKilledIsNotACrash SIGKILLs (or SIGTERMs, as an outside
// kill would) the supervisor of a running correct cell: the server dies
// with it (or by its hand), which says nothing of the server, so the cell
// is not recorded (it read as a SIGKILL crash before), the sweep exits 3,
// and a resume runs the cell (issue 39 point 2).
func TestSupervisorKilledIsNotACrash(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			supervisorSignalled(t, sig)
		})
	}
}

func supervisorSignalled(t *testing.T, sig syscall.Signal) {
	cfg := matrixtest.Config{Name: "supkill",
		Server: matrixtest.Server{Command: matrixtest.Sim("--reasoning-parser", "qwen3"), ReadyLog: "fired up and ready to roll"},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn"}},
		},
	}.Write(t, filepath.Join(t.TempDir(), "m.toml"))
	out := filepath.Join(t.TempDir(), "runs")
	cmd, stderr, done := startBMX(t, "sweep", "-c", cfg, "--out", out, "-q")
	sup := waitSupervisorWithServer(t, cmd.Process.Pid)
	if err := syscall.Kill(sup, sig); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("bmx did not end\n%s", stderr)
	}
	if code != ExitInfra || !strings.Contains(stderr.String(), "supervisor") || !strings.Contains(stderr.String(), "bmx itself failed, not the server") {
		t.Errorf("exit %d, want %d and the supervisor's end named\n%s", code, ExitInfra, stderr)
	}
	dir := runDir(t, out)
	for _, r := range readResults(t, dir) {
		t.Errorf("%s recorded as %s (%s): a supervisor killed under a cell is no verdict", r.Cell.ID, r.Verdict, r.Reason)
	}
	if code, _, errOut := runBMX(t, "sweep", "--resume", dir, "-q"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	if rs := readResults(t, dir); len(rs) != 1 || rs[0].Verdict != classify.Correct {
		t.Errorf("after the resume: %+v, want the cell run again and correct", rs)
	}
}

// waitSupervisorWithServer returns the PID of bmx's supervisor child once
// it has a child of its own (the server) that has been up a moment.
func waitSupervisorWithServer(t *testing.T, bmxPID int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, sup := range childrenOf(bmxPID) {
			if len(childrenOf(sup)) > 0 {
				time.Sleep(300 * time.Millisecond) // the server is up, its probes under way
				return sup
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no supervisor with a server within 30 s")
	return 0
}

// childrenOf lists the PIDs whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			out = append(out, child)
		}
	}
	return out
}

// TestBisectSecretAlong bisects along a secret-named var: no value of it is
// written anywhere, stdout, stderr, the run directory (file names too) or
// the published site; each is named by its place, "<secret #2>" (issue 39
// point 4: 71 places held them, and the log files' names). A resume is
// given the values again.
func TestBisectSecretAlong(t *testing.T) {
	t.Parallel()
	// The SM120 profile on its faster clock: its cell crashes from
	// version 6 on, as the built-in host's does.
	// Its cells ask one probe and a small performance probe: what the
	// bisect reads is correct or crash, and the run's files and reports
	// keep every section where a value could be written.
	cfgDir := t.TempDir()
	prof := matrixtest.WriteFile(t, filepath.Join(cfgDir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	matrixtest.WriteFile(t, filepath.Join(cfgDir, "probes.toml"), oneProbeSmallPerf)
	cfg := matrixtest.Config{Name: "tok", Vars: map[string]string{"api_token": "00000001"},
		Server: matrixtest.Server{Command: matrixtest.Sim("--sim-version", "{api_token}", "--reasoning-parser", "qwen3", "--sim-profile", prof), ReadyLog: "fired up and ready to roll"},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn"}},
		},
		Tail: "[probes]\nfile = \"probes.toml\"\n",
	}.Write(t, filepath.Join(cfgDir, "m.toml"))
	root := t.TempDir()
	out := filepath.Join(root, "runs")
	along := "api_token=00000001,00000005,00000006,00000009"
	code, stdout, stderr := runBMX(t, "bisect", "-c", cfg, "--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", along, "--out", out)
	if code != ExitOK {
		t.Fatalf("bisect: exit %d\n%s", code, stderr)
	}
	dir := runDir(t, out)
	code, _, pubErr := bmx(t, "publish", dir, "--out", filepath.Join(root, "site"))
	if code != ExitOK {
		t.Fatalf("publish: exit %d\n%s", code, pubErr)
	}
	const secret = "0000000"
	for what, text := range map[string]string{"stdout": stdout, "stderr": stderr, "publish's stderr": pubErr} {
		if strings.Contains(text, secret) {
			t.Errorf("%s holds a value of api_token:\n%s", what, text)
		}
	}
	for _, tree := range []string{dir, filepath.Join(root, "site")} {
		filepath.WalkDir(tree, func(path string, d fs.DirEntry, err error) error {
			if strings.Contains(d.Name(), secret) {
				t.Errorf("file name %s holds a value of api_token", path)
			}
			if data, _ := os.ReadFile(path); !d.IsDir() && bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds a value of api_token", path)
			}
			return nil
		})
	}
	b, err := record.ReadBisect(dir)
	if err != nil || !b.Secret || b.Finding == nil || b.Finding.FirstBad != "<secret #3>" || b.Finding.LastGood != "<secret #2>" {
		t.Errorf("bisect.json: %+v (%v); want values by place, first bad <secret #3>, last good <secret #2>", b, err)
	}
	if !strings.Contains(stdout, "first bad: api_token=<secret #3>") {
		t.Errorf("stdout does not name the first bad value by its place:\n%s", stdout)
	}
	code, _, stderr = bmx(t, "bisect", "--resume", dir)
	if code != ExitUsage || !strings.Contains(stderr, "give them again") {
		t.Errorf("resume without the values: exit %d, want %d and a line asking for them\n%s", code, ExitUsage, stderr)
	}
	if code, _, stderr = bmx(t, "bisect", "--resume", dir, "--along", along, "-q"); code != ExitOK {
		t.Errorf("resume with the values: exit %d\n%s", code, stderr)
	}
}

// TestMergeInterruptedAndKilled interrupts a merge (Ctrl-C) while it
// stages the merged run: it exits 130 saying it stopped, not that it tears
// down a server (it ignored the signal and said so before), and leaves
// nothing. A merge SIGKILLed leaves its staging, which the next merge
// removes (it stayed for ever before); so does a staging left by an older
// bmx (issue 39 point 8).
func TestMergeInterruptedAndKilled(t *testing.T) {
	t.Parallel()
	dir := sweptRun(t)
	// Many logs: linking them keeps the merge staging for a while. 10,000
	// were enough to signal the merge while it staged in 36 runs of this
	// test of 36, on 2 CPUs at load 7-12, up to 8 at once beside two busy
	// loops (30,000 before).
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(dir, "logs", fmt.Sprintf("extra-%d.log", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	merged := filepath.Join(root, "merged")
	staging := filepath.Join(root, ".merged.merging-*")
	// mergeSignalled sends sig to a merge once it stages (and, with
	// locked, once its staging is locked, its PID written: a merge killed
	// in the moment between is cleaned up by a merge 10 s later).
	mergeSignalled := func(sig syscall.Signal, locked bool) (int, string) {
		cmd, stderr, done := startBMX(t, "merge", dir, "-o", merged)
		want := staging
		if locked {
			want = filepath.Join(staging, record.LockFile)
		}
		deadline := time.Now().Add(60 * time.Second)
	wait:
		for {
			for _, m := range func() []string { m, _ := filepath.Glob(want); return m }() {
				if st, err := os.Stat(m); err == nil && (!locked || st.Size() > 0) {
					break wait
				}
			}
			select {
			case code := <-done:
				t.Fatalf("the merge ended (exit %d) before it was seen staging %s\n%s", code, want, stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 60 s\n%s", want, stderr)
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(sig)
		select {
		case code := <-done:
			return code, stderr.String()
		case <-time.After(60 * time.Second):
			t.Fatalf("merge did not end after %s\n%s", sig, stderr)
		}
		return 0, ""
	}
	code, stderr := mergeSignalled(syscall.SIGINT, false)
	if code != ExitInterrupted || strings.Contains(stderr, "server") || !strings.Contains(stderr, "interrupted: the merge was not written") {
		t.Errorf("merge interrupted: exit %d, want %d, saying so without a server\n%s", code, ExitInterrupted, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "*")); len(left) > 0 {
		t.Errorf("an interrupted merge left %v", left)
	}
	if left, _ := filepath.Glob(staging); len(left) > 0 {
		t.Errorf("an interrupted merge left %v", left)
	}
	if code, _ := mergeSignalled(syscall.SIGKILL, true); code != -1 {
		t.Fatalf("merge killed: exit %d", code)
	}
	killed, _ := filepath.Glob(staging)
	if len(killed) != 1 {
		t.Fatalf("a killed merge left %v, want its staging", killed)
	}
	// A staging directory of an older bmx, which locked none.
	older := filepath.Join(root, ".merged.merging-123")
	if err := os.MkdirAll(filepath.Join(older, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(older, old, old)
	if code, _, stderr := runBMX(t, "merge", dir, "-o", merged); code != ExitOK {
		t.Fatalf("merge again: exit %d\n%s", code, stderr)
	}
	if left, _ := filepath.Glob(staging); len(left) > 0 {
		t.Errorf("the next merge left the staging of killed ones: %v", left)
	}
}

// TestLongConfigName sweeps a config whose name is 5,000 characters:
// plan and sweep agree (the sweep exited 3 with "file name too long"
// before); the run directory's name is bounded, run.json keeps the name
// whole (issue 39 point 9).
func TestLongConfigName(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("n", 5000)
	cfg := twoCellsIn(t, t.TempDir(), name, oneProbe)
	if code, _, stderr := runBMX(t, "plan", "-c", cfg); code != ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "runs")
	code, _, stderr := runBMX(t, "sweep", "-c", cfg, "--out", out, "-q")
	if code != ExitOK {
		t.Fatalf("sweep: exit %d\n%s", code, stderr)
	}
	dir := runDir(t, out)
	if n := len(filepath.Base(dir)); n > 160 {
		t.Errorf("run directory name of %d bytes: %s", n, filepath.Base(dir))
	}
	run, err := record.ReadRun(dir)
	if err != nil || run.Name != name {
		t.Errorf("run.json: name of %d characters (%v), want the whole name", len(run.Name), err)
	}
}

// TestResumeRunsOwnFailuresAgain resumes a run in which an older bmx
// recorded its own failure to start a server as the server's crash (out of
// file descriptors: exit 127 and the error): the resume runs that cell
// again, and it is correct (issue 39 point 2: a resume kept such crashes).
func TestResumeRunsOwnFailuresAgain(t *testing.T) {
	t.Parallel()
	dir := sweptRun(t)
	var lines bytes.Buffer
	for _, r := range readResults(t, dir) {
		if r.Verdict == classify.Correct {
			r.Verdict, r.Reason, r.Probes, r.Perf = classify.Crash, "the server process exited by itself with code 127 before answering any probe", nil, nil
			r.Exit = &evidence.Exit{Code: 127}
			r.Problems = []string{"start server: start supervisor: open /dev/null: too many open files"}
		}
		json.NewEncoder(&lines).Encode(r)
	}
	if err := os.WriteFile(filepath.Join(dir, record.ResultsFile), lines.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBMX(t, "sweep", "--resume", dir, "-q")
	if code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	rep, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Cell.ID == "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn" && r.Verdict != classify.Correct {
			t.Errorf("after the resume %s is %s (%s), want it run again: correct", r.Cell.ID, r.Verdict, r.Reason)
		}
	}
	if run, _ := record.ReadRun(dir); run == nil || !strings.Contains(strings.Join(run.Notes, "\n"), "1 cell an older bmx recorded as a crash of its own failure") {
		t.Errorf("run.json's notes do not say the cell ran again: %v", run)
	}
}
