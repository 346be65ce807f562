//go:build linux

package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// newSweep builds a sweep from a config text; {self} is this test binary.
func newSweep(t testing.TB, src string) (*Sweep, []matrix.Cell) {
	t.Helper()
	cfg, err := matrix.Parse("test.toml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := record.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	self, _ := os.Executable()
	return &Sweep{Config: cfg, Probes: probe.Smoke(), Self: self, Dir: dir, Store: store, Slots: cfg.Slots}, plan.Cells
}

func TestEarlyCrashVerdict(t *testing.T) {
	sw, cells := newSweep(t, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "fatal-then-linger" }
ready_timeout = "2m"
stop_grace = "200ms"
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Crash || !strings.Contains(r.Fatal, "Scheduler hit an exception") {
		t.Fatalf("verdict %s fatal %q reason %s", r.Verdict, r.Fatal, r.Reason)
	}
	if r.Signature != "RuntimeError: CUTLASS grouped GEMM failed: Error Internal" {
		t.Errorf("signature %q: the traceback after the fatal line must be in the record", r.Signature)
	}
	// The server would have lingered a minute; bmx must not wait for it.
	if r.Timings.TotalMS > 30_000 {
		t.Errorf("cell took %d ms: bmx waited for the server's own death", r.Timings.TotalMS)
	}
}

func TestSetsidChildIsKilledByMarker(t *testing.T) {
	t.Parallel()
	sw, cells := newSweep(t, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "setsid-child" }
ready_timeout = "3s"
stop_grace = "200ms"
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Orphans != 1 {
		t.Errorf("orphans %d, want 1 (the setsid child)", r.Orphans)
	}
	if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(sw.Dir))); n != 0 {
		t.Errorf("%d marked processes survived the cell", n)
	}
}

func TestSlotsRunConcurrently(t *testing.T) {
	t.Parallel()
	sw, cells := newSweep(t, `[server]
command = ["{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--tp", "{ngpus}"]
env = { BMX_LAUNCHER_HELPER = "sim" }
ready_timeout = "20s"
stop_grace = "2s"
[[slot]]
gpus = "0"
[[slot]]
gpus = "1"
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_trtllm"]
[[axis]]
name = "fp4"
flag = "--fp4-gemm-backend"
values = ["flashinfer_cudnn", "flashinfer_cutlass"]
`)
	sw.Probes = probe.Set{Probes: probe.Smoke().Probes[:2]}
	results, err := sw.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results", len(results))
	}
	ports := map[int]bool{}
	bySlot := map[string][]record.Result{}
	for _, r := range results {
		ports[r.Port] = true
		bySlot[r.Slot] = append(bySlot[r.Slot], r)
		log, _ := os.ReadFile(r.LogPath)
		if !strings.Contains(string(log), "CUDA_VISIBLE_DEVICES="+r.Slot+"\n") {
			t.Errorf("%s ran on slot %q but its log says:\n%.300s", r.Cell.ID, r.Slot, log)
		}
	}
	if len(bySlot["0"]) == 0 || len(bySlot["1"]) == 0 {
		t.Errorf("slots used: %v", len(bySlot))
	}
	if len(ports) != 4 {
		t.Errorf("ports %v: each cell needs its own", ports)
	}
	overlap := false
	for _, a := range bySlot["0"] {
		for _, b := range bySlot["1"] {
			if a.Started.Before(b.Ended) && b.Started.Before(a.Ended) {
				overlap = true
			}
		}
	}
	if !overlap {
		t.Error("no two cells on different slots ran at the same time")
	}
}

func TestRetriesMakeFlaky(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	sw, cells := newSweep(t, fmt.Sprintf(`retries = 2
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "flaky", FLAKY_STATE = %q }
ready_timeout = "20s"
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass"]
`, state))
	sw.Probes = probe.Set{Probes: probe.Smoke().Probes[:3]}
	results, err := sw.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Verdict != classify.Flaky || len(r.Attempts) != 1 || r.Attempts[0].Verdict != classify.Crash {
		t.Fatalf("verdict %s attempts %+v reason %s", r.Verdict, r.Attempts, r.Reason)
	}
	if !strings.Contains(r.Reason, "crash, then correct") || !strings.HasSuffix(r.LogPath, "~attempt2.log") {
		t.Errorf("reason %q log %s", r.Reason, r.LogPath)
	}
}

func TestRetriesKeepAStableCrash(t *testing.T) {
	t.Parallel()
	sw, cells := newSweep(t, `retries = 1
[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "exit1" }
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
	results, err := sw.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Verdict != classify.Crash || len(r.Attempts) != 1 {
		t.Errorf("verdict %s attempts %d", r.Verdict, len(r.Attempts))
	}
}

// fakeSMI writes an nvidia-smi stand-in that prints the memory state kept in
// a file, so a test can make GPU memory stay "held".
func fakeSMI(t *testing.T) (smi, state string) {
	t.Helper()
	dir := t.TempDir()
	state = filepath.Join(dir, "state")
	smi = filepath.Join(dir, "nvidia-smi")
	os.WriteFile(state, []byte("0, 0\n1, 0\n"), 0o644)
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *--query-gpu*) cat %q ;; *) echo 'fake nvidia-smi: full report' ;; esac\n", state)
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return smi, state
}

// TestGPUHygiene: a cell that leaves GPU memory held is blamed for it, and
// the next cell on that slot does not start on a full GPU.
func TestGPUHygiene(t *testing.T) {
	t.Parallel()
	smi, state := fakeSMI(t)
	sw, cells := newSweep(t, fmt.Sprintf(`[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "leak", SMI_STATE = %q }
[gpu]
smi = [%q]
busy_mib = 1024
free_timeout = "600ms"
[[slot]]
gpus = "0"
[[axis]]
name = "a"
env = "A"
values = ["first", "second"]
`, state, smi))
	results, err := sw.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results", len(results))
	}
	first, second := results[0], results[1]
	if !strings.Contains(strings.Join(first.Problems, "\n"), "GPU memory still held 600ms after teardown: GPU 0: 9000 MiB") {
		t.Errorf("the leaker is not blamed: %q", first.Problems)
	}
	if second.Verdict != classify.Skipped || !strings.Contains(second.Reason, "GPU 0: 9000 MiB") {
		t.Errorf("second cell: %s %s", second.Verdict, second.Reason)
	}
	if len(sw.Notes()) != 0 {
		t.Errorf("notes %q", sw.Notes())
	}
}

func TestHangForensics(t *testing.T) {
	t.Parallel()
	smi, _ := fakeSMI(t)
	sw, cells := newSweep(t, fmt.Sprintf(`[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "grandchild" }
ready_timeout = "3s"
stop_grace = "200ms"
[gpu]
smi = [%q]
[[axis]]
name = "a"
env = "A"
values = ["x"]
`, smi))
	sw.gpus, _ = server.NewGPUs(sw.Config.GPU)
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Forensics
	if r.Verdict != classify.Hang || f == nil {
		t.Fatalf("verdict %s forensics %v", r.Verdict, f)
	}
	if len(f.PIDs) != 2 {
		t.Errorf("pids %v: want the server and its child", f.PIDs)
	}
	if !strings.Contains(f.NvidiaSMI, "fake nvidia-smi: full report") {
		t.Errorf("nvidia-smi snapshot %q", f.NvidiaSMI)
	}
	if _, err := execLookPath("py-spy"); err != nil && !strings.Contains(strings.Join(f.Notes, ";"), "py-spy not on PATH") {
		t.Errorf("notes %q", f.Notes)
	}
}

// TestPortTaken: a server told to bind a port that something else holds dies
// with the bind error, and bmx does not mistake the other listener for it.
func TestPortTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	// argparse keeps the last --port: the sim binds the taken one.
	sw, cells := newSweep(t, fmt.Sprintf(`[server]
command = ["{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--port", "%d"]
env = { BMX_LAUNCHER_HELPER = "sim" }
ready_timeout = "20s"
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass"]
`, taken))
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Crash || !strings.Contains(r.LogTail, "address already in use") {
		t.Errorf("verdict %s (%s)\n%s", r.Verdict, r.Reason, r.LogTail)
	}
}

func TestPreflight(t *testing.T) {
	cfg, err := matrix.Parse("p.toml", []byte(`[server]
command = ["/no/such/server", "--tp", "{ngpus}"]
[[axis]]
name = "a"
flag = "--a"
values = ["x"]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := cfg.Expand()
	ro := filepath.Join(t.TempDir(), "file")
	os.WriteFile(ro, nil, 0o644)
	errs := Preflight(cfg, plan.Cells, nil, "/bin/bmx", filepath.Join(ro, "runs"))
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"server.command has no {port}", "{ngpus} cannot be filled in", "output directory"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	errs = Preflight(cfg, plan.Cells, []matrix.Slot{{GPUs: "0,1"}}, "/bin/bmx", t.TempDir())
	if len(errs) != 2 || !strings.Contains(errs[1].Error(), `server executable "/no/such/server"`) || !strings.Contains(errs[1].Error(), "no such file or directory") {
		t.Errorf("errors %v", errs)
	}
}

func TestSplitSlots(t *testing.T) {
	slots, err := SplitSlots([]string{"0", "1", "2", "3", "4", "5", "6", "7"}, 2)
	if err != nil || len(slots) != 2 || slots[0].GPUs != "0,1,2,3" || slots[1].GPUs != "4,5,6,7" {
		t.Errorf("%v %v", slots, err)
	}
	if slots, err := SplitSlots(nil, 3); err != nil || len(slots) != 3 || slots[0].GPUs != "" {
		t.Errorf("no GPUs: %v %v", slots, err)
	}
	if _, err := SplitSlots([]string{"0"}, 2); err == nil {
		t.Error("more slots than GPUs: no error")
	}
}

// TestMarkerIsTheRunsOwn: two sweeps of one config started in the same
// second into different --out folders have run directories of the same
// name. A cell's teardown kills what carries its marker; it must not kill
// the other sweep's server of the same cell (it did, when the marker began
// with the directory's name: CI saw servers of a concurrent test die of
// SIGKILL).
func TestMarkerIsTheRunsOwn(t *testing.T) {
	sw, cells := newSweep(t, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "exit1" }
ready_timeout = "10s"
stop_grace = "200ms"
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
	sw.Dir = filepath.Join(t.TempDir(), "20261203T150936Z-sim-sm120")
	other := filepath.Join(t.TempDir(), "20261203T150936Z-sim-sm120")
	if server.RunMarker(sw.Dir) == server.RunMarker(other) {
		t.Fatalf("two run directories share a marker: %s", server.RunMarker(other))
	}
	// Nor does a run in a directory inside another run's.
	if inner := server.MarkerPrefix(server.RunMarker(filepath.Join(other, "sub"))) + cells[0].ID + "#1"; strings.HasPrefix(inner, server.MarkerPrefix(server.RunMarker(other))) {
		t.Errorf("the marker %s of a run inside %s starts with that run's prefix", inner, other)
	}
	// One directory named by a symlink or a relative path has one marker
	// (a resume finds the leftovers of the attempt before it).
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "runs")
	if err := os.Symlink(filepath.Dir(other), link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(other))
	if a, b, c := server.RunMarker(other), server.RunMarker(filepath.Join(link, filepath.Base(other))), server.RunMarker(filepath.Base(other)); a != b || a != c {
		t.Errorf("one directory, three markers: %s, %s, %s", a, b, c)
	}
	self, _ := os.Executable()
	stranger := execCommand(self)
	stranger.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=stuck-ignore-term", server.MarkerEnv+"="+server.MarkerPrefix(server.RunMarker(other))+cells[0].ID+"#1")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- stranger.Wait() }()
	t.Cleanup(func() { stranger.Process.Kill() })

	results, err := sw.Run(context.Background(), cells)
	if err != nil || len(results) != 1 || results[0].Verdict != classify.Crash {
		t.Fatalf("the sweep: %v, %+v", err, results)
	}
	select {
	case err := <-done:
		t.Fatalf("the other sweep's server of the same cell was killed: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(other))); n != 1 {
		t.Errorf("killed %d by the other run's marker, want its 1 server", n)
	}
}

// TestSupervisorKilledLeavesNothing: a server starts a grandchild in a
// session of its own with an empty environment (setsid env -i: neither the
// process group nor the marker finds it), then SIGKILLs the supervisor
// that holds its tree. bmx adopts the grandchild and kills it, counting it
// as an orphan, and no process is left; the cell is no verdict but bmx's
// own failure (a *HarnessError), since the server died with its
// supervisor.
//
// It is not parallel: bmx kills what it adopted, and a test's own process
// in a new session could look adopted while a supervisor dies.
func TestSupervisorKilledLeavesNothing(t *testing.T) {
	naps := strconv.Itoa(800000 + os.Getpid()%99999)
	sw, cells := newSweep(t, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "kill-supervisor", NAPS = "`+naps+`" }
ready_timeout = "20s"
stop_grace = "200ms"
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	left := procsByCmdline("sleep\x00" + naps)
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if he := (*HarnessError)(nil); !errors.As(err, &he) {
		t.Fatalf("err %v, want a *HarnessError: a supervisor killed under a cell is bmx's failure", err)
	}
	if len(left) != 0 {
		t.Errorf("%d processes outlived the SIGKILLed supervisor: %v", len(left), left)
	}
	if r.Orphans < 1 {
		t.Errorf("orphans %d, want the grandchild counted", r.Orphans)
	}
}

// procsByCmdline lists the live processes whose command line (NUL
// separated) starts with prefix.
func procsByCmdline(prefix string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmd), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestSetupCheckReleasesSlots: the setup check (the first cell, run alone)
// holds the other slots only until its server is ready and has answered its
// first probe. The first cell's server answers its later probes only once
// the second cell's server has started, so it is correct only if the other
// slots were released while it still ran (before, it waited out its probe
// timeout and was a hang).
func TestSetupCheckReleasesSlots(t *testing.T) {
	t.Parallel()
	gate := t.TempDir()
	sw, cells := newSweep(t, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "setup-gate", GATE = "`+gate+`" }
ready_timeout = "30s"
probe_timeout = "30s"
stop_grace = "2s"
[gpu]
smi = ["/nonexistent/nvidia-smi"]
[[slot]]
gpus = "0"
[[slot]]
gpus = "1"
[[axis]]
name = "n"
env = "N"
values = ["0", "1", "2"]
`)
	sayOK := probe.Chat("say-ok", "Say 'OK'", &evidence.Expect{Contains: "OK"}, 16, 1)
	sw.Probes = probe.Set{Probes: []probe.Probe{sayOK, sayOK}}
	sw.StopOnSetup = true
	results, err := sw.Run(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	for _, r := range results {
		if r.Verdict != classify.Correct {
			t.Errorf("%s: %s (%s)", r.Cell.ID, r.Verdict, r.Reason)
		}
	}
}

// TestSetupCheckFailsBesideOthers: with three slots, the cells beside the
// setup check start at once, and when the check shows the setup broken they
// are torn down and not recorded: the sweep stops with the *SetupError, the
// first cell is its one result, and no slot started a second server.
func TestSetupCheckFailsBesideOthers(t *testing.T) {
	t.Parallel()
	sw, cells := newSweep(t, `[server]
command = ["sh", "-c", "echo 'sh: 1: /opt/missing/server: not found' >&2; exit 127"]
ready_timeout = "10s"
[gpu]
smi = ["/nonexistent/nvidia-smi"]
[[slot]]
gpus = "0"
[[slot]]
gpus = "1"
[[slot]]
gpus = "2"
[[axis]]
name = "a"
flag = "--a"
values = ["1", "2", "3", "4", "5", "6"]
`)
	sw.StopOnSetup = true
	results, err := sw.Run(context.Background(), cells)
	var setup *SetupError
	if !errors.As(err, &setup) || setup.Cell != cells[0].ID {
		t.Fatalf("err %v, want the setup error of %s", err, cells[0].ID)
	}
	if len(results) != 1 || results[0].Cell.ID != cells[0].ID {
		t.Errorf("results %+v: want %s only", results, cells[0].ID)
	}
	logs, _ := os.ReadDir(filepath.Join(sw.Dir, "logs"))
	if len(logs) > 3 {
		t.Errorf("%d servers started on 3 slots, want at most one each", len(logs))
	}
	stored, _ := os.ReadFile(filepath.Join(sw.Dir, record.ResultsFile))
	if n := strings.Count(string(stored), "\n"); n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
}
