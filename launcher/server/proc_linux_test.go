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
	cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=stuck-ignore-term", MarkerEnv+"=killtest/cell#1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(100 * time.Millisecond)
	if n := KillMarked("other/"); n != 0 {
		t.Errorf("killed %d unrelated processes", n)
	}
	if n := KillMarked("killtest/"); n != 1 {
		t.Errorf("killed %d, want 1", n)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("marked process survived")
	}
}
