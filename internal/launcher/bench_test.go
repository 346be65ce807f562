//go:build linux

package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// The benchmarks below measure the launcher against servers whose own time is
// known. Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./internal/launcher
//
// Targets: bmx's overhead per cell at most 15 ms (median, the server's own
// process start not counted), crash verdict at most
// 100 ms after the fatal line, 4 slots at least 3.8x faster than 1 on 16
// cells, peak RSS at most 50 MiB while a server writes 1 GiB of log, a hang
// verdict within about 1.5 probe timeouts.

func benchConfig(mode, startup string, slots, cells int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = %q, BENCH_STARTUP = %q }
ready_timeout = "60s"
stop_grace = "5s"
[gpu]
smi = ["/nonexistent/nvidia-smi"]
`, mode, startup)
	for i := range slots {
		fmt.Fprintf(&b, "[[slot]]\ngpus = \"%d\"\n", i)
	}
	b.WriteString("[[axis]]\nname = \"n\"\nenv = \"N\"\nvalues = [")
	for i := range cells {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", strconv.Itoa(i))
	}
	b.WriteString("]\n")
	return b.String()
}

// benchSweep is a sweep that sends one "Say 'OK'".
func benchSweep(b *testing.B, src string) (*Sweep, []matrix.Cell) {
	b.Helper()
	sw, cells := newSweep(b, src)
	sayOK := probe.Chat("say-ok", "Say 'OK'", &evidence.Expect{Contains: "OK"}, 16, 1)
	sw.Probes = probe.Set{Probes: []probe.Probe{sayOK}}
	return sw, cells
}

// BenchmarkCellOverhead: wall time per cell minus the server's own start-up
// time (300 ms), one slot; and that less the server's process start (the
// test binary's exec to its main, measured apart), which is bmx's share.
func BenchmarkCellOverhead(b *testing.B) {
	const startup = 300 * time.Millisecond
	var overheads []float64
	for range b.N {
		sw, cells := benchSweep(b, benchConfig("bench", startup.String(), 1, 10))
		for _, cell := range cells {
			t0 := time.Now()
			r, err := sw.RunCell(context.Background(), "", cell, 1)
			if err != nil || r.Verdict != "correct" {
				b.Fatalf("%v %s %s", err, r.Verdict, r.Reason)
			}
			overheads = append(overheads, float64(time.Since(t0)-startup)/1e6)
		}
	}
	slices.Sort(overheads)
	b.ReportMetric(overheads[len(overheads)/2], "ms-overhead-median")
	b.ReportMetric(overheads[len(overheads)*9/10], "ms-overhead-p90")
	// The server is this test binary: its own process start is the
	// host's cost, reported apart, and bmx's share is the median less it.
	start := testenv.ProcessStart(b, 21, func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=started")
		return cmd
	})
	b.ReportMetric(start, "ms-server-start-median")
	b.ReportMetric(overheads[len(overheads)/2]-start, "ms-bmx-overhead-median")
}

var atRe = regexp.MustCompile(`(FATAL|TERM)_AT=(\d+)`)

// BenchmarkCrashVerdictLatency: from the moment a still-running server logs
// a fatal line to the SIGTERM bmx sends it.
func BenchmarkCrashVerdictLatency(b *testing.B) {
	var lat []float64
	for range b.N {
		sw, cells := benchSweep(b, benchConfig("fatal-bench", "0s", 1, 5))
		for _, cell := range cells {
			r, err := sw.RunCell(context.Background(), "", cell, 1)
			if err != nil || r.Verdict != "crash" || r.Fatal == "" {
				b.Fatalf("%v %s %q", err, r.Verdict, r.Fatal)
			}
			log, _ := os.ReadFile(r.LogPath)
			at := map[string]int64{}
			for _, m := range atRe.FindAllStringSubmatch(string(log), -1) {
				at[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
			}
			if at["FATAL"] == 0 || at["TERM"] == 0 {
				b.Fatalf("timestamps missing from log:\n%s", log)
			}
			lat = append(lat, float64(at["TERM"]-at["FATAL"])/1e6)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(lat[0], "ms-verdict-min")
	b.ReportMetric(lat[len(lat)/2], "ms-verdict-median")
	b.ReportMetric(lat[len(lat)-1], "ms-verdict-max")
}

// BenchmarkSlotSpeedup: 16 cells of a 1 s server on 4 slots against 1 slot,
// with the setup check on (the first cell runs alone until its server has
// answered, as a sweep without --keep-going does). Each iteration sweeps
// both ways; the speed-ups of the iterations are reported as min and median
// (-benchtime 5x for five), with bmx's own CPU time a cell (this process's).
func BenchmarkSlotSpeedup(b *testing.B) {
	var one, four time.Duration
	var cpu [2]time.Duration // bmx's own (this process's) CPU time
	var speedups []float64
	for range b.N {
		var took [2]time.Duration
		for i, slots := range []int{1, 4} {
			sw, cells := benchSweep(b, benchConfig("bench", "1s", slots, 16))
			sw.StopOnSetup = true
			t0 := time.Now()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			results, err := sw.Run(context.Background(), cells)
			if err != nil || len(results) != 16 {
				b.Fatalf("%v, %d results", err, len(results))
			}
			took[i] = time.Since(t0)
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu[i] += time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
		}
		one, four = one+took[0], four+took[1]
		speedups = append(speedups, float64(took[0])/float64(took[1]))
	}
	slices.Sort(speedups)
	b.ReportMetric(one.Seconds()/float64(b.N), "s-1slot")
	b.ReportMetric(four.Seconds()/float64(b.N), "s-4slots")
	b.ReportMetric(speedups[0], "x-speedup-min")
	b.ReportMetric(speedups[len(speedups)/2], "x-speedup-median")
	b.ReportMetric(float64(cpu[0].Milliseconds())/float64(16*b.N), "ms-bmx-cpu/cell-1slot")
	b.ReportMetric(float64(cpu[1].Milliseconds())/float64(16*b.N), "ms-bmx-cpu/cell-4slots")
}

// BenchmarkLogFloodRSS: bmx's peak resident memory while its server writes
// 1 GiB of log. The peak counter is reset first (clear_refs 5), so only the
// cell counts.
func BenchmarkLogFloodRSS(b *testing.B) {
	for range b.N {
		sw, cells := benchSweep(b, benchConfig("flood-1g", "0s", 1, 1))
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Skipf("cannot reset the peak RSS counter: %v", err)
		}
		before := peakRSS(b)
		r, err := sw.RunCell(context.Background(), "", cells[0], 1)
		if err != nil || r.Verdict != "crash" {
			b.Fatalf("%v %s", err, r.Verdict)
		}
		st, _ := os.Stat(r.LogPath)
		if st.Size() < 1<<30 {
			b.Fatalf("log is %d bytes", st.Size())
		}
		b.ReportMetric(float64(peakRSS(b))/1024, "MiB-peak-rss")
		b.ReportMetric(float64(before)/1024, "MiB-rss-before")
		os.Remove(r.LogPath)
	}
}

// peakRSS is VmHWM in KiB.
func peakRSS(b *testing.B) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// BenchmarkHangVerdict: a server that answers /health and the model list
// but never generates, with the built-in smoke set and a 2 s probe timeout:
// the time from the cell's start to its hang verdict (teardown included), as
// a multiple of probe_timeout. Target: at most about 1.5.
func BenchmarkHangVerdict(b *testing.B) {
	const probeTimeout = 2 * time.Second
	var ratios []float64
	for range b.N {
		for range 3 {
			sw, cells := newSweep(b, `[server]
command = ["{self}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = "no-generate" }
ready_timeout = "20s"
probe_timeout = "`+probeTimeout.String()+`"
stop_grace = "5s"
[gpu]
smi = ["/nonexistent/nvidia-smi"]
[[axis]]
name = "a"
env = "A"
values = ["x"]
`)
			t0 := time.Now()
			r, err := sw.RunCell(context.Background(), "", cells[0], 1)
			if err != nil || r.Verdict != "hang" {
				b.Fatalf("%v %s %s", err, r.Verdict, r.Reason)
			}
			ratios = append(ratios, float64(time.Since(t0))/float64(probeTimeout))
		}
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-probe-timeout-median")
	b.ReportMetric(ratios[len(ratios)-1], "x-probe-timeout-max")
}

// BenchmarkHugeReplyRSS: bmx's peak resident memory while a server answers
// a probe with 10 MB of text, and what results.jsonl keeps of it.
func BenchmarkHugeReplyRSS(b *testing.B) {
	for range b.N {
		sw, cells := benchSweep(b, strings.Replace(benchConfig("huge-reply", "0s", 1, 1), `stop_grace = "5s"`, `stop_grace = "1s"`, 1))
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Skipf("cannot reset the peak RSS counter: %v", err)
		}
		before := peakRSS(b)
		if _, err := sw.Run(context.Background(), cells); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(sw.Dir, record.ResultsFile))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(peakRSS(b))/1024, "MiB-peak-rss")
		b.ReportMetric(float64(before)/1024, "MiB-rss-before")
		b.ReportMetric(float64(st.Size())/1024, "KiB-results")
	}
}
