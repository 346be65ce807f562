package record

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lockHelper names the environment variable that makes this test binary a
// bmx holding the lock of the run directory it names, until it is killed.
const lockHelper = "BMX_RECORD_LOCK_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHelper); dir != "" {
		if _, err := LockRunDir(dir); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin) // hold it until killed
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdLock starts a process that holds dir's lock, once it says so.
func holdLock(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), lockHelper+"="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder did not lock: %q", line)
	}
	return cmd
}

// TestLockRunDir: while a live process holds a run directory, another is
// refused with its PID, and the lock file keeps naming it; once the holder
// is killed (SIGKILL: it cleans nothing up) its lock is taken over, naming
// the dead PID; a lock released cleanly is taken without a takeover.
func TestLockRunDir(t *testing.T) {
	dir := t.TempDir()
	holder := holdLock(t, dir)
	pid := holder.Process.Pid
	_, err := LockRunDir(dir)
	var locked *LockedError
	if !errors.As(err, &locked) || locked.PID != pid || !strings.Contains(err.Error(), "PID "+strconv.Itoa(pid)) {
		t.Fatalf("lock of a held directory: %v, want a *LockedError naming PID %d", err, pid)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, LockFile)); strings.TrimSpace(string(data)) != strconv.Itoa(pid) {
		t.Errorf("the refused lock changed the lock file: %q", data)
	}
	holder.Process.Kill()
	holder.Wait()
	l, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("the lock of a dead holder is not taken over: %v", err)
	}
	if l.Stale != pid {
		t.Errorf("Stale = %d, want the dead holder's PID %d", l.Stale, pid)
	}
	// The lock is the open file's: a second one, even in this process, is
	// refused.
	if _, err := LockRunDir(dir); !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Errorf("second lock in one process: %v, want a *LockedError naming PID %d", err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l, err = LockRunDir(dir)
	if err != nil || l.Stale != 0 {
		t.Fatalf("after a clean unlock: %+v, %v; want no takeover", l, err)
	}
	l.Unlock()
}

func TestLockRunDirMissing(t *testing.T) {
	if _, err := LockRunDir(filepath.Join(t.TempDir(), "gone")); err == nil || errors.As(err, new(*LockedError)) {
		t.Errorf("lock of a missing directory: %v", err)
	}
}
