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

	"github.com/bmx-dev/bmx/internal/classify"
)

// TestServerFatalLine walks one server's life through the package's own
// API: a server that logs a fatal line and lingers is reported by
// WaitReady as that line (not as a timeout), the traceback after the line
// is in its tail once it settled, and Teardown ends it with SIGTERM (an
// exit bmx caused is no crash: Exit is nil) and leaves nothing behind.
func TestServerFatalLine(t *testing.T) {
	srv, marker, _ := startHelper(t, "fatal-then-linger")
	ready := srv.WaitReady(context.Background(), Readiness{Health: "/health", Timeout: time.Minute})
	if ready.Ready || ready.TimedOut || !strings.Contains(ready.Fatal, "Scheduler hit an exception") {
		t.Fatalf("ready %+v: want the fatal line", ready)
	}
	if !srv.Alive() {
		t.Fatal("the server lingers a minute after its fatal line; it is gone already")
	}
	srv.Settle()
	if tail, err := srv.Tail(); err != nil || !strings.Contains(tail, "RuntimeError: CUTLASS grouped GEMM failed") {
		t.Errorf("tail %q (%v): the traceback after the fatal line is missing", tail, err)
	}
	stopped := srv.Teardown(5 * time.Second)
	if stopped.How != "SIGTERM" || len(stopped.Problems) != 0 || srv.Exit() != nil {
		t.Errorf("teardown %+v, exit %v", stopped, srv.Exit())
	}
	if n := KillMarked(marker); n != 0 {
		t.Errorf("%d processes of the server outlived its teardown", n)
	}
}

// TestReadinessBacksOffOnceAnswered: a server that has bound its port but
// answers /health 503 while it warms up (and logs each poll, as uvicorn
// does) is polled every fastPoll, not at the quicker pace used while its
// port refuses connections.
func TestReadinessBacksOffOnceAnswered(t *testing.T) {
	const warm = 400 * time.Millisecond
	srv, _, logPath := startHelper(t, "warming", "WARM="+warm.String())
	defer srv.Teardown(5 * time.Second)
	if ready := srv.WaitReady(context.Background(), Readiness{Health: "/health", Timeout: time.Minute}); !ready.Ready {
		t.Fatalf("ready %+v", ready)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	polls := strings.Count(string(data), "HEALTH ")
	// Polls come at most every fastPoll while the server warms up (a
	// loaded host makes them fewer, never more); at firstPoll's pace
	// there would be about 200.
	if most := int(warm/fastPoll) + 3; polls > most || polls < 2 {
		t.Errorf("%d polls of /health in a %s warm-up, want 2 to %d", polls, warm, most)
	}
}

// startHelper starts this test binary as a server in helper mode, with
// PORT (its port) and env added, and returns it with its marker and log.
// Markers are seen host-wide: the run is the test's temporary directory,
// so a concurrent run of the test is not killed by this one.
func startHelper(t *testing.T, mode string, env ...string) (srv *Server, marker, logPath string) {
	t.Helper()
	self, _ := os.Executable()
	dir := t.TempDir()
	logPath = filepath.Join(dir, "server.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	var ports Ports
	port, err := ports.Take("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ports.Release(port) })
	marker = CellMarker(RunMarker(dir), "a=x", 1)
	env = append(env, "BMX_LAUNCHER_HELPER="+mode, "PORT="+strconv.Itoa(port), MarkerEnv+"="+marker)
	srv, err = Start(Spec{Argv: []string{self}, Env: env, Marker: marker, Log: log, Host: "127.0.0.1", Port: port, IsFatal: classify.IsFatal})
	if err != nil {
		t.Fatal(err)
	}
	return srv, marker, logPath
}
