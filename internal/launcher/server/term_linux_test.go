//go:build linux

package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTermEndsTreeItself: once the server has exited on bmx's "term" and
// left nothing behind, the supervisor ends the tree and reports it without
// waiting for bmx's "kill" (one round trip less in every teardown), and
// then takes the next server; a server whose child is still shutting down
// when it exits is left to "kill", which ends the child.
func TestTermEndsTreeItself(t *testing.T) {
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "a.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv, err := start([]string{"sleep", "30"}, os.Environ(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv.send("term") // and never "kill"
	select {
	case <-srv.finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor waited for a kill after the server exited on SIGTERM")
	}
	if srv.status == nil || srv.status.Signal != "SIGTERM" || srv.done.Event != "done" || len(srv.done.Left) > 0 {
		t.Fatalf("exit %+v, done %+v", srv.status, srv.done)
	}
	active.remove(srv)

	// The main process exits on SIGTERM at once; its child ignores it and
	// is still there: the supervisor waits for bmx's word.
	child := filepath.Join(dir, "child.pid")
	script := `trap '' TERM; sh -c 'trap "" TERM; echo $$ > ` + child + `; exec sleep 30' & trap - TERM; while [ ! -s ` + child + ` ]; do sleep 0.01; done; exec sleep 30`
	srv, err = start([]string{"sh", "-c", script}, os.Environ(), log)
	if err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, child)
	srv.send("term")
	select {
	case <-srv.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not exit on SIGTERM")
	}
	select {
	case <-srv.finished:
		t.Fatal("the supervisor ended the tree while a process of it was still running")
	case <-time.After(300 * time.Millisecond):
	}
	if unix.Kill(pid, 0) != nil {
		t.Fatalf("pid %d (ignores SIGTERM) is gone before the kill", pid)
	}
	srv.end()
	if unix.Kill(pid, 0) == nil || srv.done.Event != "done" || len(srv.done.Left) > 0 {
		t.Errorf("after the kill: pid %d alive %v, done %+v", pid, unix.Kill(pid, 0) == nil, srv.done)
	}
	active.remove(srv)
}

func waitPID(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			return pid
		}
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// TestStartWaitsForPrespawn: a server started while a prespawned
// supervisor is on its way takes that one instead of starting another
// beside it.
func TestStartWaitsForPrespawn(t *testing.T) {
	for s := takeSpare(); s != nil; s = takeSpare() {
		s.discard()
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "a.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	before := supervisorsStarted.Load()
	Prespawn(1)
	srv, err := start([]string{"sleep", "30"}, os.Environ(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv.stop(time.Second)
	if n := supervisorsStarted.Load() - before; n != 1 {
		t.Errorf("%d supervisors started for one prespawned and one server, want 1", n)
	}
}

// TestTeardownClosesConnections: bmx's keep-alive connections to a server
// are closed before its SIGTERM, so a server that waits for its open
// connections on the way down (uvicorn, Go's http.Server.Shutdown) finds
// none of bmx's.
func TestTeardownClosesConnections(t *testing.T) {
	srv, _, logPath := startHelper(t, "drain")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r := srv.WaitReady(ctx, Readiness{Health: "/health", Timeout: 30 * time.Second}); !r.Ready {
		t.Fatalf("not ready: %+v", r)
	}
	resp, err := srv.Client(5 * time.Second).Get(srv.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the connection stays, idle, for the next request
	srv.Teardown(10 * time.Second)
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), "OPEN AFTER SIGTERM 0") {
		t.Errorf("the server still had bmx's connections open at its SIGTERM:\n%s", log)
	}
}
