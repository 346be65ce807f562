//go:build linux

package server

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestKillMarked(t *testing.T) {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	// Markers are seen host-wide: the run is this test's temporary
	// directory, so a concurrent run of this test kills only its own.
	run, other := MarkerPrefix(RunMarker(t.TempDir())), MarkerPrefix(RunMarker(t.TempDir()))
	cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=stuck-ignore-term", MarkerEnv+"="+run+"cell#1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Start returns once the helper has been executed with its environment,
	// which is when /proc shows its marker.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if n := KillMarked(other); n != 0 {
		t.Errorf("killed %d unrelated processes", n)
	}
	if n := KillMarked(run); n != 1 {
		t.Errorf("killed %d, want 1", n)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("marked process survived")
	}
}
