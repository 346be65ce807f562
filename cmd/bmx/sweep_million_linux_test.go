package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/record"
)

// TestSweepMillionCells: a sweep of 10^6 cells (--max-cells raised) started
// in a real bmx process under `ulimit -v 2000000` runs its first cells (a
// server that exits at once) in the plan's order, holding little memory
// for the cells not yet run: its peak RSS stays far below the 1.1 GB the
// cells held built took. Interrupted, it exits 130 with every result whole;
// resumed (under the same limit), it goes on with the next cells and runs
// none twice.
func TestSweepMillionCells(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeMillionConfig(t, dir, `"sh", "-c", "exit 1", "sh", "--port", "{port}"`)
	out := filepath.Join(dir, "runs")
	first := sweepUnderLimit(t, "sweep", "-c", cfgPath, "--max-cells", "1000000", "--out", out, "--keep-going", "-q")
	runs, _ := filepath.Glob(filepath.Join(out, "*-big"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v, want one", runs)
	}
	run := runs[0]
	if first < 3 {
		t.Fatalf("%d cells recorded before the interrupt, want at least 3", first)
	}
	checkMillionResults(t, run, first)
	again := sweepUnderLimit(t, "sweep", "--resume", run, "--max-cells", "1000000", "--keep-going", "-q")
	checkMillionResults(t, run, first+again)
}

// sweepUnderLimit runs bmx with args under `ulimit -v 2000000` until at
// least 3 more results are in the run's results.jsonl, reads its peak RSS,
// interrupts it, and returns how many results it added. It fails the test
// unless bmx exits 130 and its peak RSS stays under 200 MB.
func sweepUnderLimit(t *testing.T, args ...string) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The run directory's results are counted before and after; a new run
	// has none yet.
	resultsOf := func() int {
		var n int
		for i, a := range args {
			if a == "--resume" {
				n = countLines(filepath.Join(args[i+1], record.ResultsFile))
			}
			if a == "--out" {
				files, _ := filepath.Glob(filepath.Join(args[i+1], "*", record.ResultsFile))
				for _, f := range files {
					n += countLines(f)
				}
			}
		}
		return n
	}
	before := resultsOf()
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 2000000 && exec "$0" "$@"`, self}, args...)...)
	cmd.Env = append(os.Environ(), underLimitEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Generous: the machine the tests run on may be loaded.
	deadline := time.After(5 * time.Minute)
	hwm := ""
poll:
	for {
		select {
		case err := <-exited:
			t.Fatalf("bmx %s ended before 3 cells were recorded: %v\n%s", strings.Join(args, " "), err, ends(stderr.String(), 1500))
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("bmx %s recorded %d cells in 5 minutes\n%s", strings.Join(args, " "), resultsOf()-before, tail(stderr.String(), 3000))
		case <-time.After(20 * time.Millisecond):
			if resultsOf()-before >= 3 {
				hwm = vmHWM(cmd.Process.Pid)
				break poll
			}
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	if code := cmd.ProcessState.ExitCode(); code != ExitInterrupted {
		t.Fatalf("bmx %s interrupted: %v (exit %d), want exit %d\n%s", strings.Join(args, " "), err, code, ExitInterrupted, ends(stderr.String(), 1500))
	}
	kb, _ := strconv.Atoi(strings.TrimSuffix(strings.Join(strings.Fields(hwm), " "), " kB"))
	maxrss := 0
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxrss = int(ru.Maxrss)
	}
	t.Logf("bmx %s: VmHWM %s after 3 cells, peak RSS %.1f MB at exit", strings.Join(args[:2], " "), hwm, float64(maxrss)/1024)
	if kb == 0 || kb > 200_000 || maxrss > 200_000 {
		t.Errorf("peak RSS %q after 3 cells, %d kB at exit: want both under 200 MB (the built cells took 1.1 GB)", hwm, maxrss)
	}
	return resultsOf() - before
}

// vmHWM is the VmHWM line's value in /proc/pid/status ("52508 kB").
func vmHWM(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkMillionResults: the run's results.jsonl holds n whole results, of
// the plan's first n cells in order (one slot, the file order), each the
// crash of a server that exited by itself.
func checkMillionResults(t *testing.T, run string, n int) {
	t.Helper()
	results, torn, err := record.RecoverResults(run)
	if err != nil || torn {
		t.Fatalf("results of %s: %v (torn %v)", run, err, torn)
	}
	if len(results) != n {
		t.Fatalf("%d results, want %d", len(results), n)
	}
	for i, r := range results {
		var id strings.Builder
		for a, k := 0, i; a < 6; a++ {
			if a > 0 {
				id.WriteByte(',')
			}
			// The exclude (a0 = a1 = a2 = v9) is far past the first cells.
			fmt.Fprintf(&id, "a%d=v%d", a, k/pow10(5-a)%10)
		}
		if r.Cell.ID != id.String() || r.Verdict != "crash" {
			t.Errorf("result %d: %s %s, want %s crash", i, r.Cell.ID, r.Verdict, id.String())
		}
	}
}

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}
