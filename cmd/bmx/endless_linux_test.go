package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestEndlessStream sweeps, through a real bmx process, a correct cell
// whose server never ends a stream: one that streams a word a chunk past
// max_tokens, and one that streams chunks with no text. The performance
// probe cuts each stream and says so; what it keeps stays small. Before
// the cut, the probe kept every gap between chunks until the probe
// timeout: 40 s gave bmx 359 MB, a 9.3 MB results line and a 68 MB
// report.json. $BMX_TEST_ENDLESS_TIMEOUT sets the probe timeout (default
// 4s), to measure a longer stream.
func TestEndlessStream(t *testing.T) {
	t.Parallel()
	timeout := 4 * time.Second
	if s := os.Getenv("BMX_TEST_ENDLESS_TIMEOUT"); s != "" {
		var err error
		if timeout, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, cut string }{
		{"text", "bmx cut the stream after 320 chunks with text"},
		{"empty", "bmx cut the stream after 2048 events"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "endless.toml")
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`name = "endless"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}"]
env = { %s = %q }
ready_timeout = "10s"
probe_timeout = %q
[[axis]]
name = "fp4_gemm"
flag = "--fp4-gemm-backend"
values = ["flashinfer_cudnn"]
`, endlessServer, tc.mode, timeout.String())), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "runs")
			cmd := exec.Command(self, "sweep", "-q", "-c", cfg, "--out", out)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("bmx sweep: %v\n%s%s", err, stdout.String(), stderr.String())
			}
			wall := time.Since(start)
			maxrss := int64(0)
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				maxrss = ru.Maxrss
			}
			run := runDir(t, out)
			line, err := os.ReadFile(filepath.Join(run, record.ResultsFile))
			if err != nil {
				t.Fatal(err)
			}
			report, err := os.Stat(filepath.Join(run, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s streams, probe timeout %v: sweep %.1f s, peak RSS %.1f MB, results line %d bytes, report.json %d bytes",
				tc.mode, timeout, wall.Seconds(), float64(maxrss)/1024, len(line), report.Size())
			var r record.Result
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatal(err)
			}
			if r.Verdict != classify.Correct || r.Perf == nil {
				t.Fatalf("verdict %s (%s), perf %+v: want correct, measured", r.Verdict, r.Reason, r.Perf)
			}
			w := r.Perf.Warmup
			if w.OK() || !strings.Contains(w.Err, tc.cut) || len(w.ITLUS) > evidence.KeepGaps {
				t.Errorf("warm-up %s %q, %d gaps kept: want it failed with %q, at most %d gaps", w.ErrKind, w.Err, len(w.ITLUS), tc.cut, evidence.KeepGaps)
			}
			if got := strings.Join(r.Perf.Problems, "\n"); !strings.Contains(got, tc.cut) {
				t.Errorf("problems %q: want them to say %q", got, tc.cut)
			}
			if w.E2EUS > timeout.Microseconds()/2 {
				t.Errorf("the warm-up took %v: the stream was read until the probe timeout (%v), not cut", time.Duration(w.E2EUS)*time.Microsecond, timeout)
			}
			if len(line) > 256<<10 || report.Size() > 1<<20 {
				t.Errorf("results line %d bytes, report.json %d: want at most 256 KiB and 1 MiB", len(line), report.Size())
			}
		})
	}
}
