//go:build linux

package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestSupervisorSIGKILL: a server starts a grandchild that leaves its
// process group and its environment behind (setsid env -i), so neither the
// group nor the marker finds it; then its supervisor is SIGKILLed, which
// frees the tree from the one process that held it. bmx, a child subreaper
// itself, adopts the grandchild and kills it: no process is left.
//
// It is not parallel: bmx kills the processes it adopted, and a test that
// starts a process of its own in a new session while a supervisor dies
// could look adopted.
func TestSupervisorSIGKILL(t *testing.T) {
	dir := t.TempDir()
	// The grandchild is named by a sleep that no other test sleeps.
	naps := strconv.Itoa(900000 + os.Getpid()%99999)
	script := filepath.Join(dir, "server.sh")
	body := fmt.Sprintf("#!/bin/sh\nsetsid env -i sleep %s &\necho started grandchild\nexec sleep %s1\n", naps, naps)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "server.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Spec{Argv: []string{script}, Marker: CellMarker(RunMarker(dir), "a=x", 1), Log: log,
		Host: "127.0.0.1", Port: port, ReadyLine: regexp.MustCompile("never"), IsFatal: func([]byte) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sleepers(naps)) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(sleepers(naps)); n != 2 {
		t.Fatalf("%d of the server and its grandchild run", n)
	}
	if err := srv.proc.sup.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.Exited()
	st := srv.Teardown(time.Second)
	left := sleepers(naps)
	for _, pid := range left {
		_ = killProcess(pid)
	}
	if len(left) != 0 {
		t.Errorf("%d processes outlived their SIGKILLed supervisor: %v", len(left), left)
	}
	if st.Orphans < 1 {
		t.Errorf("the teardown counts %d orphans, want the grandchild: %+v", st.Orphans, st)
	}
	t.Logf("teardown: %+v", st)
}

// sleepers lists the live processes whose command line is "sleep <naps>..."
func sleepers(naps string) []int {
	var pids []int
	forEachProc(func(pid int, dir string) {
		cmd, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err == nil && bytes.HasPrefix(cmd, []byte("sleep\x00"+naps)) {
			if p, ok := readProc(pid); ok && p.state != 'Z' {
				pids = append(pids, pid)
			}
		}
	})
	return pids
}

func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
