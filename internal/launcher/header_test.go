//go:build linux

package launcher

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestOwnHeaderIsNoFatalLine: bmx writes each cell's ID and command at the
// top of its log; an axis value that reads as a fatal line there ("error:
// Scheduler hit an exception") must not stop the server as if it had logged
// it, nor be any cell's evidence. Both cells are healthy servers.
func TestOwnHeaderIsNoFatalLine(t *testing.T) {
	t.Parallel()
	srv := simServer("--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend", "flashinfer_cudnn")
	out := newTestSession(t, writeLightConfig(t, matrixtest.Config{Name: "header", Server: srv,
		Axes: []matrixtest.Axis{{Name: "wd", Flag: "--watchdog-timeout", Values: []string{"30", "error: Scheduler hit an exception"}}},
	})).mustRun(t)
	results := readResults(t, out.Dir)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	for _, r := range results {
		if r.Verdict != classify.Correct || r.Fatal != "" || strings.Contains(r.Evidence+r.Signature, "# bmx") {
			t.Errorf("%s: %s, fatal %q, evidence %q: bmx's own header taken for the server's", r.Cell.ID, r.Verdict, r.Fatal, r.Evidence)
		}
	}
}
