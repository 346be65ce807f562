package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestBigLineBounded: a run whose results.jsonl holds one valid 100 MB
// line (an answer and a log tail of 50 MB each, as another writer or an
// older bmx may have left it) is reported by a real bmx process within a
// bound far below the line's size, the line read cut and the report
// saying so; the report files a resume writes stay small. (Before, bmx
// report took 11 times the line: 2.3 GB for a 200 MB one.)
func TestBigLineBounded(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	run := &record.Run{Name: "big", BMXVersion: "test", Config: "name = \"big\"\n", ConfigPath: "big.toml", Started: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		Axes: []record.AxisValues{{Name: "moe", Values: []string{"a", "b"}}}}
	if err := record.WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	writeBigLine(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"md", "json"} {
		out := filepath.Join(dir, "report."+format)
		cmd := exec.Command(self, "report", dir, "--format", format, "-o", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		hwm, err := runPeak(cmd)
		if err != nil {
			t.Fatalf("bmx report --format %s: %v\n%s", format, err, stderr.String())
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("report --format %s of a 100 MB line: peak RSS %.1f MB, %d bytes written", format, float64(hwm)/(1<<20), fi.Size())
		if hwm > 150<<20 || fi.Size() > 2<<20 {
			t.Errorf("report --format %s took %.1f MB and wrote %d bytes: what is read of one line is not bounded", format, float64(hwm)/(1<<20), fi.Size())
		}
		if data, _ := os.ReadFile(out); !strings.Contains(string(data), "bmx read it cut") {
			t.Errorf("report --format %s does not say the line was read cut", format)
		}
	}
}

// writeBigLine writes the run's results, as a stream (this process stays
// small): moe=a's line of 100 MB, an answer and a log tail of 50 MB each;
// moe=b's small.
func writeBigLine(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fp := classify.Fingerprint()
	repeat := func(s string) {
		chunk := strings.Repeat(s, 1<<20/len(s))
		for range 50 {
			f.WriteString(chunk)
		}
	}
	f.WriteString(`{"cell":{"id":"moe=a","values":[{"axis":"moe","value":"a"}]},"verdict":"garbage","reason":"garbage","classifier":"` + fp +
		`","probes":[],"observations":[{"name":"say_ok","prompt":"Say 'OK'","expect":null,"http_status":200,"error":"","reasoning":"","text":"`)
	repeat("!!!! garbage ")
	f.WriteString(`"}],"exit":null,"timed_out":false,"repro":"","argv":[],"port":0,"log_path":"","log_tail":"`)
	repeat(`RuntimeError: a line of the log\n`)
	f.WriteString(`","timings":{"ready_ms":0,"probes_ms":0,"stop_ms":0,"total_ms":0},"started":"2026-03-10T12:00:00Z","ended":"2026-03-10T12:01:00Z"}` + "\n")
	f.WriteString(`{"cell":{"id":"moe=b","values":[{"axis":"moe","value":"b"}]},"verdict":"correct","reason":"fine","classifier":"` + fp +
		`","probes":[],"observations":[{"name":"say_ok","prompt":"Say 'OK'","expect":null,"http_status":200,"error":"","reasoning":"","text":"OK"}],"exit":null,"timed_out":false,"repro":"","argv":[],"port":0,"log_path":"","log_tail":"","timings":{"ready_ms":0,"probes_ms":0,"stop_ms":0,"total_ms":0},"started":"2026-03-10T12:00:00Z","ended":"2026-03-10T12:01:00Z"}` + "\n")
}

// runPeak runs cmd and returns its peak resident memory (VmHWM of
// /proc/PID/status, read every 5 ms while it runs): rusage's ru_maxrss of
// a child counts the parent's own as it forked.
func runPeak(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(status); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					var n int64
					fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), &n)
					peak = max(peak, n<<10)
				}
			}
		}
		select {
		case err := <-done:
			return peak, err
		case <-tick.C:
		}
	}
}
