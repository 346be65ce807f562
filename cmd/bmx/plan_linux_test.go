package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPlanCellsStream: bmx plan prints its cells one at a time as it builds
// them, holding none of the plan whole. It runs in a real bmx process under
// `ulimit -v 2000000` (2 GB of address space) twice, for 9,990 and for
// 99,900 cells (--max-cells raised), prints every cell each time, and its
// peak RSS for ten times the cells stays under 1.5 times the smaller
// plan's: a plan held whole took about 2 KB a cell, 200 MB more at the
// larger size. BenchmarkPlanMillionCells runs the plan of 10^6 cells and
// reports its peak RSS (VmHWM, read while it runs).
func TestPlanCellsStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	small := planUnderLimit(t, writeBigConfig(t, dir, 4, `"srv", "--port", "{port}"`))
	large := planUnderLimit(t, writeBigConfig(t, filepath.Join(dir, "large"), 5, `"srv", "--port", "{port}"`))
	t.Logf("peak RSS of bmx plan: %.1f MB for 9,990 cells, %.1f MB for 99,900", float64(small)/1024, float64(large)/1024)
	if small <= 0 || large*2 > small*3 {
		t.Errorf("peak RSS of bmx plan: %d kB for 9,990 cells, %d kB for 99,900: want the larger under 1.5 times the smaller (the plan streamed)", small, large)
	}
}

// BenchmarkPlanMillionCells runs bmx plan of 10^6 cells under `ulimit -v
// 2000000` (which the plan held whole used to exhaust), checks every cell
// printed and reports the process's peak RSS (peak-MB).
//
//	go test -run '^$' -bench PlanMillionCells -benchtime 1x ./cmd/bmx
func BenchmarkPlanMillionCells(b *testing.B) {
	cfg := writeBigConfig(b, b.TempDir(), 6, `"srv", "--port", "{port}"`)
	var peak int64
	for b.Loop() {
		peak = max(peak, planUnderLimit(b, cfg))
	}
	b.ReportMetric(float64(peak)/1024, "peak-MB")
}

// planUnderLimit runs bmx plan of cfgPath (a writeBigConfig config) under
// `ulimit -v 2000000`, reads its output as it comes (about 80 bytes a
// cell), checks every cell and exclusion was printed, the first line and
// the last of each, and returns bmx's peak RSS in kB.
func planUnderLimit(t testing.TB, cfgPath string) int64 {
	t.Helper()
	axes := 0
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	axes = bytes.Count(data, []byte("[[axis]]"))
	total := pow10(axes)
	wantCells, wantExcluded := total-total/1000, total/1000
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `ulimit -v 2000000 && exec "$0" "$@"`, self, "plan", "-c", cfgPath, "--max-cells", fmt.Sprint(total))
	cmd.Env = append(os.Environ(), underLimitEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchHWM(cmd.Process.Pid)
	sc := bufio.NewScanner(out)
	var first, lastCell, lastExcluded string
	cells, excluded := 0, 0
	// Lines are looked at as bytes: a string for each of 3 million lines
	// cost the benchmark a second of CPU.
	var last []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case first == "":
			first = string(line)
		case bytes.HasPrefix(line, []byte("   argv: ")):
			cells++
		case bytes.HasPrefix(line, []byte("excluded: ")):
			excluded++
			lastExcluded = string(line)
		case len(line) > 0 && line[0] != ' ':
			last = append(last[:0], line...)
		}
	}
	lastCell = string(last)
	hwm := peak()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bmx plan: %v\n%s", err, tail(stderr.String(), 2000))
	}
	if want := fmt.Sprintf("big: %d cells, %d excluded ({port} is a free port chosen when each cell starts)", wantCells, wantExcluded); first != want {
		t.Errorf("first line %q, want %q", first, want)
	}
	if cells != wantCells || excluded != wantExcluded {
		t.Errorf("%d cells and %d excluded printed, want %d and %d", cells, excluded, wantCells, wantExcluded)
	}
	// The last cell is the last before the exclude's (a0 = a1 = a2 = v9).
	values := func(a2 string) string {
		var b strings.Builder
		for a := range axes {
			v := "v9"
			if a == 2 {
				v = a2
			}
			fmt.Fprintf(&b, ",a%d=%s", a, v)
		}
		return b.String()[1:]
	}
	if want := fmt.Sprintf("%d. %s", wantCells, values("v8")); lastCell != want {
		t.Errorf("last cell %q, want %q", lastCell, want)
	}
	if want := "excluded: " + values("v9"); lastExcluded != want {
		t.Errorf("last excluded %q, want %q", lastExcluded, want)
	}
	if hwm == 0 {
		t.Fatal("no VmHWM read of bmx plan")
	}
	return hwm
}

// watchHWM reads pid's peak RSS (VmHWM of /proc/PID/status) every 5 ms
// until the function it returns is called, which returns the highest read,
// in kB. A child's rusage is no measure: its ru_maxrss counts the parent's
// RSS as it forked (see runPeak), and the test process may be the larger.
func watchHWM(pid int) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	read := func() {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(vmHWM(pid), " kB"), 10, 64); err == nil {
			peak.Store(max(peak.Load(), kb))
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			read()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		read()
		return peak.Load()
	}
}

// underLimitEnv is the environment of bmx run under `ulimit -v 2000000`:
// this test binary as bmx, as a user runs it. bmx links glibc through net's
// resolver, and glibc reserves 64 MB of address space for each thread that
// mallocs, up to 8 a CPU: a bmx with a few more threads than usual, on a
// loaded machine, reached the limit by those reservations alone (VmPeak
// 1.96 GB of the 2.0 GB, resident 34 MB). These tests set
// MALLOC_ARENA_MAX=2 then; bmx now holds malloc to two arenas itself
// (arenas_cgo_linux.go), so the limit catches memory bmx holds, not address
// space glibc reserves.
var underLimitEnv = []string{asBMX + "=1"}

// writeBigConfig writes big.toml into dir: axes (3 or more) axes of ten
// values, one exclude of a thousandth of the combinations (a0 = a1 = a2 =
// v9), so 999,000 cells of 6 axes; server.command is command (TOML array
// items). It returns the file's path.
func writeBigConfig(t testing.TB, dir string, axes int, command string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name = \"big\"\n[server]\ncommand = [%s]\n", command)
	for i := range axes {
		fmt.Fprintf(&b, "[[axis]]\nname = \"a%d\"\nflag = \"--a%d\"\nvalues = [\"v0\", \"v1\", \"v2\", \"v3\", \"v4\", \"v5\", \"v6\", \"v7\", \"v8\", \"v9\"]\n", i, i)
	}
	b.WriteString("[[exclude]]\na0 = \"v9\"\na1 = \"v9\"\na2 = \"v9\"\n")
	cfgPath := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ends is s's first and last n bytes: a Go runtime's fatal error names its
// cause at the top of a long goroutine dump.
func ends(s string, n int) string {
	if len(s) > 2*n {
		return s[:n] + "\n[...]\n" + s[len(s)-n:]
	}
	return s
}
