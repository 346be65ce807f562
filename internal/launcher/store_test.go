//go:build linux

package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestStoreFullStopsSweep: the results store fails as a full disk does
// (it writes to /dev/full, so the write gets ENOSPC; a results.jsonl that
// links there is refused, as every link in a run directory is). The sweep starts no
// further cell, tears down the cell in flight on the other slot instead of
// waiting out its two-minute ready timeout, and returns the store's error.
func TestStoreFullStopsSweep(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	cfg, err := matrix.Parse("full.toml", []byte(`[server]
command = ["{self}", "--port", "{port}"]
ready_timeout = "2m"
stop_grace = "200ms"
[gpu]
smi = ["/nonexistent/nvidia-smi"]
[[slot]]
gpus = "0"
[[slot]]
gpus = "1"
[[axis]]
name = "m"
env = "CELL"
values = [
  { name = "hang", env = { BMX_LAUNCHER_HELPER = "stuck-ignore-term" } },
  { name = "crash1", env = { BMX_LAUNCHER_HELPER = "exit1" } },
  { name = "crash2", env = { BMX_LAUNCHER_HELPER = "exit1" } },
  { name = "crash3", env = { BMX_LAUNCHER_HELPER = "exit1" } },
]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	store := fullStore{full}
	self, _ := os.Executable()
	sw := &Sweep{Config: cfg, Probes: probe.Smoke(), Self: self, Dir: dir, Store: store, Slots: cfg.Slots}
	t0 := time.Now()
	results, err := sw.Run(context.Background(), plan.Cells)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err %v, want the store's ENOSPC", err)
	}
	if len(results) != 0 {
		t.Errorf("%d results reported as recorded", len(results))
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the sweep took %s: the hanging cell in flight was waited for, not torn down", d)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	if len(logs) != 2 {
		t.Errorf("cells started: %v, want the two that were running when the store failed", logs)
	}
	if n := server.KillMarked(server.MarkerPrefix(sw.RunID)); n != 0 {
		t.Errorf("%d servers outlived the sweep", n)
	}
}

// fullStore appends results as record.Store does, to f (/dev/full).
type fullStore struct{ f *os.File }

func (s fullStore) Append(r record.Result) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write result %s: %w", r.Cell.ID, err)
	}
	return nil
}
