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

// TestSweepCellsStream: a sweep started in a real bmx process under
// `ulimit -v 2000000` runs its first cells (a server that exits at once) in
// the plan's order, holding little memory for the cells not yet run: for
// 99,900 cells (--max-cells raised) its peak RSS stays under 1.5 times that
// of a sweep of 999 cells (the cells held built took about 1.1 KB each,
// 110 MB more). Interrupted, it exits 130 with every result whole; resumed
// (under the same limit), it goes on with the next cells and runs none
// twice, its peak RSS as bounded. BenchmarkSweepMillionCells does the same
// with 10^6 cells and reports the peak RSS.
func TestSweepCellsStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, small := sweepStreams(t, filepath.Join(dir, "small"), 3, false)
	_, large := sweepStreams(t, filepath.Join(dir, "large"), 5, true)
	t.Logf("peak RSS of bmx sweep: %.1f MB for 999 cells; for 99,900 %.1f MB, %.1f MB resumed", float64(small[0])/1024, float64(large[0])/1024, float64(large[1])/1024)
	for i, what := range []string{"sweep", "resume"} {
		if small[0] <= 0 || large[i]*2 > small[0]*3 {
			t.Errorf("peak RSS of the %s of 99,900 cells %d kB, of the sweep of 999 %d kB: want under 1.5 times (the cells not yet run not held built)", what, large[i], small[0])
		}
	}
}

// BenchmarkSweepMillionCells: a sweep of 10^6 cells (--max-cells raised)
// under `ulimit -v 2000000` runs its first 3 cells, is interrupted,
// resumed for 3 more and interrupted again, as TestSweepCellsStream checks;
// it reports the larger peak RSS of the two (peak-MB).
//
//	go test -run '^$' -bench SweepMillionCells -benchtime 1x ./cmd/bmx
func BenchmarkSweepMillionCells(b *testing.B) {
	var peak int64
	for b.Loop() {
		_, rss := sweepStreams(b, b.TempDir(), 6, true)
		peak = max(peak, rss[0], rss[1])
	}
	b.ReportMetric(float64(peak)/1024, "peak-MB")
}

// sweepStreams sweeps a writeBigConfig config of axes axes into dir's runs
// until 3 cells are recorded, interrupts it and checks its results; with
// resume, it resumes the run for 3 more cells the same way. It returns the
// run and the peak RSS in kB of each bmx (the sweep's, the resume's).
func sweepStreams(t testing.TB, dir string, axes int, resume bool) (string, [2]int64) {
	t.Helper()
	cfgPath := writeBigConfig(t, dir, axes, `"sh", "-c", "exit 1", "sh", "--port", "{port}"`)
	out := filepath.Join(dir, "runs")
	maxCells := fmt.Sprint(pow10(axes))
	var rss [2]int64
	first, rss0 := sweepUnderLimit(t, "sweep", "-c", cfgPath, "--max-cells", maxCells, "--out", out, "--keep-going", "-q")
	rss[0] = rss0
	runs, _ := filepath.Glob(filepath.Join(out, "*-big"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v, want one", runs)
	}
	run := runs[0]
	if first < 3 {
		t.Fatalf("%d cells recorded before the interrupt, want at least 3", first)
	}
	checkMillionResults(t, run, axes, first)
	if resume {
		again, rss1 := sweepUnderLimit(t, "sweep", "--resume", run, "--max-cells", maxCells, "--keep-going", "-q")
		rss[1] = rss1
		checkMillionResults(t, run, axes, first+again)
	}
	return run, rss
}

// sweepUnderLimit runs bmx with args under `ulimit -v 2000000` until at
// least 3 more results are in the run's results.jsonl, reads its peak RSS,
// interrupts it, and returns how many results it added and its peak RSS
// after those cells (VmHWM), in kB. It fails the test unless bmx exits 130
// and its peak RSS then and at its exit stay under 200 MB.
func sweepUnderLimit(t testing.TB, args ...string) (int, int64) {
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
	kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.Join(strings.Fields(hwm), " "), " kB"), 10, 64)
	var maxrss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxrss = ru.Maxrss
	}
	if kb == 0 || kb > 200_000 || maxrss > 200_000 {
		t.Errorf("bmx %s: peak RSS %q after 3 cells, %d kB at exit: want both under 200 MB", strings.Join(args[:2], " "), hwm, maxrss)
	}
	// The peak after 3 cells is bmx's own; rusage's at exit counts this
	// process's RSS as it forked too (see runPeak).
	return resultsOf() - before, kb
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
// the first n cells of a writeBigConfig plan of axes axes in order (one
// slot, the file order), each the crash of a server that exited by itself.
func checkMillionResults(t testing.TB, run string, axes, n int) {
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
		for a, k := 0, i; a < axes; a++ {
			if a > 0 {
				id.WriteByte(',')
			}
			// The exclude (a0 = a1 = a2 = v9) is far past the first cells.
			fmt.Fprintf(&id, "a%d=v%d", a, k/pow10(axes-1-a)%10)
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
