package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/launcher"
)

// TestSlotsBounded: a --slots no host could use is refused in one line that
// names it, exit 2, before a run directory exists; more slots than cells
// sweep on one slot per cell.
func TestSlotsBounded(t *testing.T) {
	t.Parallel()
	t.Run("huge", func(t *testing.T) {
		out := t.TempDir()
		code, stdout, stderr := bmx(t, "sweep", "--out", out, "--quiet", "--slots", "99999999")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != ExitUsage || len(lines) != 1 || !strings.Contains(lines[0], "--slots 99999999") ||
			!strings.Contains(lines[0], fmt.Sprint(launcher.MaxSlots)) {
			t.Fatalf("exit %d, want %d, and one line naming --slots and its bound\nstdout:\n%s\nstderr:\n%s", code, ExitUsage, stdout, stderr)
		}
		if dirs, _ := os.ReadDir(out); len(dirs) != 0 {
			t.Errorf("a refused sweep left %v in --out", dirs)
		}
	})
	t.Run("more than cells", func(t *testing.T) {
		// One short probe: what is checked is how many slots sweep.
		dir := t.TempDir()
		cfg := filepath.Join(dir, "two.toml")
		if err := os.WriteFile(filepath.Join(dir, "probes.toml"), []byte(oneProbe), 0o644); err != nil {
			t.Fatal(err)
		}
		src := `name = "two"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}"]
ready_timeout = "30s"
[probes]
file = "probes.toml"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_trtllm"]
`
		if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		code, stdout, stderr := bmx(t, "sweep", "-c", cfg, "--out", out, "--quiet", "--slots", "64")
		if code != ExitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stderr, "sweeping 2 cells of two on 2 slot(s)") {
			t.Errorf("64 slots for 2 cells should sweep on 2 slots:\n%s", stderr)
		}
	})
}
