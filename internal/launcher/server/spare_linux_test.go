//go:build linux

package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpareSupervisor: a server's teardown leaves its supervisor waiting
// as a spare, the next start takes it, and a server that cannot start through a spare is an
// error (never a nil server without one).
func TestSpareSupervisor(t *testing.T) {
	dir := t.TempDir()
	log := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for takeSpare() != nil { // spares of earlier tests
	}
	srv, err := start([]string{"sleep", "30"}, os.Environ(), log("a.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv.stop(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(spares) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// One spare waits at the head of the queue: this teardown's, or one an
	// earlier test left there (the rest are discarded).
	first := takeSpare()
	if first == nil {
		t.Fatal("no spare supervisor after a teardown")
	}
	for s := takeSpare(); s != nil; s = takeSpare() {
		s.discard()
	}
	spares <- first

	// A script whose interpreter does not exist passes LookPath and fails
	// in the supervisor's exec.
	bad := filepath.Join(dir, "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err = start([]string{bad}, os.Environ(), log("b.log"))
	if err == nil || srv != nil {
		t.Fatalf("start of %s through a spare: server %v, error %v", bad, srv, err)
	}
	if !strings.Contains(err.Error(), "fork/exec") {
		t.Errorf("error %q does not say the exec failed", err)
	}
	for s := takeSpare(); s != nil; s = takeSpare() {
		if s == first {
			t.Errorf("the spare was not taken")
		}
		s.discard()
	}

	// A spare that has gone (as one past its idle time) is replaced.
	s, err := spawnSupervisor()
	if err != nil {
		t.Fatal(err)
	}
	s.discard()
	<-s.gone
	spares <- s
	srv, err = start([]string{"sleep", "30"}, os.Environ(), log("c.log"))
	if err != nil {
		t.Fatalf("start after a dead spare: %v", err)
	}
	if got := srv.stop(time.Second); got != "SIGTERM" {
		t.Errorf("stop: %q", got)
	}
}

// TestSpareRunsInTodaysDirectory: a server started through a spare
// supervisor runs in bmx's working directory as it is when the cell starts,
// not in the one the spare was started in (which may have been removed
// since: getcwd then fails in the server).
func TestSpareRunsInTodaysDirectory(t *testing.T) {
	old, now := t.TempDir(), t.TempDir()
	t.Chdir(old)
	for takeSpare() != nil { // spares of earlier tests
	}
	s, err := spawnSupervisor()
	if err != nil {
		t.Fatal(err)
	}
	spares <- s
	t.Chdir(now)
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(now, "pwd.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv, err := start([]string{"sh", "-c", "pwd -P; sleep 30"}, os.Environ(), f)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var out []byte
	for len(out) == 0 && time.Now().Before(deadline) {
		out, _ = os.ReadFile(logPath)
		time.Sleep(10 * time.Millisecond)
	}
	srv.stop(time.Second)
	want, _ := filepath.EvalSymlinks(now)
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("the server ran in %q, want %q (the spare's was %s)", got, want, old)
	}
}
