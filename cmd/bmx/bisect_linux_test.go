package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestBisectResume interrupts a real bmx bisect of the built-in host (the
// cell crashes from version 6 on) after its two ends are recorded: exit
// 130, no server left, the command to go on on stderr. The same bisect
// again finds the unfinished run directory, reads the recorded steps
// instead of running them and finishes it in as many cell runs as an
// uninterrupted bisect, printing the finding, and bmx report renders the
// run directory. --resume DIR of the finished bisect runs nothing and
// says the same finding. How the steps go (nine versions, skips, perf) is
// launcher/bisect's TestStepping*, on recorded results.
func TestBisectResume(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "runs")
	args := []string{"bisect", "--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", "sim_version=4,5,6,7,8", "--out", out}
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
	if b.Finding == nil || b.Finding.FirstBad != "6" || b.Runs != 4 || countLines(results) != 4 {
		t.Fatalf("after resuming (%d results kept): finding %+v, %d runs, %d results; want 6 in 4 runs\n%s", kept, b.Finding, b.Runs, countLines(results), stdout)
	}
	if n := strings.Count(errs, "running "); n != 4-kept {
		t.Errorf("the resume ran %d cells, want %d (4 less the %d recorded)\n%s", n, 4-kept, kept, errs)
	}
	const finding = "crash (CUDA error: an illegal memory access was encountered) from 6 on; 5 correct"
	if !strings.Contains(stdout, "first bad: sim_version=6") || !strings.Contains(stdout, finding) || !strings.Contains(stdout, "4 cell runs") {
		t.Errorf("stdout does not say the finding:\n%s", stdout)
	}
	if code, rep, stderr := bmx(t, "report", dir); code != 0 || !strings.Contains(rep, "sim_version") {
		t.Errorf("bmx report of the bisect: exit %d\n%s\n%s", code, rep, stderr)
	}
	code, again, errs := bmx(t, "bisect", "--resume", dir)
	if code != 0 || again != stdout || strings.Contains(errs, "running ") || countLines(results) != 4 {
		t.Errorf("--resume of the finished bisect: exit %d, ran again: %v\n%s\n%s", code, strings.Contains(errs, "running "), again, errs)
	}
}
