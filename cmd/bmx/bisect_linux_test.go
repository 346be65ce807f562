package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestBisectResume interrupts a real bmx bisect after its two ends are
// recorded and starts the same bisect again: bmx finds the unfinished run
// directory, reads the recorded steps instead of running them and finishes
// it, in the same five cell runs as an uninterrupted bisect. --resume DIR
// of the finished bisect runs nothing and says the same finding.
func TestBisectResume(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "runs")
	args := []string{"bisect", "--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", nineVersions, "--out", out}
	cmd, stderr, done := startBMX(t, args...)
	results := waitResults(t, out, 2, stderr)
	cmd.Process.Signal(syscall.SIGINT)
	if code := <-done; code != ExitInterrupted {
		t.Fatalf("exit %d after SIGINT, want 130\n%s", code, stderr)
	}
	dir := filepath.Dir(results)
	if !strings.Contains(stderr.String(), "bmx bisect --resume "+dir) {
		t.Errorf("stderr does not say how to go on:\n%s", stderr)
	}
	if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(dir))); n != 0 {
		t.Errorf("%d servers outlived the interrupted bisect", n)
	}
	kept := countLines(results)
	code, stdout, errs := runBMX(t, args...)
	if code != 0 || !strings.Contains(errs, "resuming the bisect in "+dir) {
		t.Fatalf("the same bisect again: exit %d, want it to resume %s\n%s\n%s", code, dir, stdout, errs)
	}
	b, err := record.ReadBisect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Finding == nil || b.Finding.FirstBad != "6" || b.Runs != 5 || countLines(results) != 5 {
		t.Fatalf("after resuming (%d results kept): finding %+v, %d runs, %d results; want 6 in 5 runs\n%s", kept, b.Finding, b.Runs, countLines(results), stdout)
	}
	if n := strings.Count(errs, "running "); n != 5-kept {
		t.Errorf("the resume ran %d cells, want %d (5 less the %d recorded)\n%s", n, 5-kept, kept, errs)
	}
	code, again, errs := runBMX(t, "bisect", "--resume", dir)
	if code != 0 || again != stdout || strings.Contains(errs, "running ") || countLines(results) != 5 {
		t.Errorf("--resume of the finished bisect: exit %d, ran again: %v\n%s\n%s", code, strings.Contains(errs, "running "), again, errs)
	}
}
