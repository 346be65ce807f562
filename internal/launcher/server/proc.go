package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// MarkerEnv is set in every server's environment to
// "<run>//<cell>#<attempt>" (MarkerPrefix of the run, then the cell).
// Descendants inherit it, so bmx can find a process that left the server's
// process group (setsid, a double fork) and kill it.
const MarkerEnv = "BMX_MARKER"

// RunMarker names a run in its servers' markers: the run directory's
// absolute path, resolved through symlinks. No other run on the host shares
// it, so one run's teardown never kills another's servers (the directory's
// name alone is shared by two sweeps of one config started in the same
// second into different --out folders); and a resume that names the
// directory by another path (a symlinked /home, a relative path from
// elsewhere) still finds the earlier attempt's leftovers.
//
// Markers begin with MarkerPrefix(RunMarker(dir)).
func RunMarker(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// ErrUnsupported means this OS cannot run a sweep (see CanSweep).
var ErrUnsupported = errors.New("not supported on this OS")

// Process timing. Each value trades how fast bmx notices a change against how
// often it asks.
const (
	// markedKillWait bounds how long KillMarked keeps killing marked
	// processes: long enough for a process tree to fork its last child and
	// die, short enough not to hold up the next cell behind one that cannot
	// be killed (another user's process, an uninterruptible sleep).
	markedKillWait = 3 * time.Second
	// markedKillPoll is how often KillMarked looks for marked processes
	// again: a SIGKILLed process is reaped in a few milliseconds.
	markedKillPoll = 20 * time.Millisecond
	// portFreeWait bounds the wait for a stopped server's port to be free:
	// the kernel releases a listening socket as its last holder dies, so
	// anything longer means a process outlived the teardown.
	portFreeWait = 5 * time.Second
	// portFreePoll is how often the port is tried again.
	portFreePoll = 50 * time.Millisecond
	// portTries is how many ports freePort tries, and Take asks of it,
	// before giving up: a port that another running cell holds, or that
	// another process listens on, is met a few times in a row at most.
	portTries = 20
	// treeKillWait bounds how long the supervisor keeps killing its
	// descendants: a SIGKILLed process dies at once unless it sleeps
	// uninterruptibly in a driver, and bmx must not wait forever on one.
	treeKillWait = 10 * time.Second
	// treeKillPoll is how often the supervisor looks for descendants
	// again while killing (a child re-parented to it, a fork in flight).
	treeKillPoll = 5 * time.Millisecond
)

// SuperviseArg, as bmx's first argument, makes it a server's supervisor
// (Supervise); bmx starts itself so, never a user.
const SuperviseArg = "__supervise"

// supEvent is one line of the supervisor's report to bmx.
type supEvent struct {
	// Event is "started" (PID is the server), "error" (it could not
	// start), "exit" (the server's main process ended: Code, Signal) or
	// "done" (the tree is gone: Killed, Escaped, Left).
	Event string `json:"event"`
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
	// Harness marks an "error" that is the supervisor's own (its log could
	// not be opened, no file descriptor or memory was left to fork), not
	// the server's (its executable is missing or cannot run), and an
	// "exit" the supervisor caused itself on a signal from outside bmx
	// (Error says which).
	Harness bool   `json:"harness,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  string `json:"signal,omitempty"`
	// Killed counts the processes SIGKILLed at the end; Escaped those of
	// them that had left the server's process group.
	Killed  int `json:"killed,omitempty"`
	Escaped int `json:"escaped,omitempty"`
	// Escapees name them: "pid 123: python3 worker.py".
	Escapees []string `json:"escapees,omitempty"`
	// Left lists processes still alive after treeKillWait.
	Left []int `json:"left,omitempty"`
	// Warning says what the supervisor could not set up (no subreaper).
	Warning string `json:"warning,omitempty"`
}

// supervisor is bmx re-executed (SuperviseArg) to hold one server's tree
// at a time: the process, its control pipe and its events.
type supervisor struct {
	cmd *exec.Cmd
	// ctl is the control pipe to the supervisor; nil once closed.
	ctlMu sync.Mutex
	ctl   *os.File
	// evR carries the supervisor's events, read through events.
	evR    *os.File
	events *json.Decoder
	// gone is closed when the supervisor has exited.
	gone chan struct{}
	// since is when the supervisor started (clock ticks since boot): what
	// the trees it held started is younger.
	since uint64
	// startErr says why the last server did not start.
	startErr error
}

// process is one running server: its main process, its process group and
// the supervisor that holds its tree.
type process struct {
	// sup holds the server's tree; pid is the server (and its process
	// group).
	sup *supervisor
	pid int
	// start is the server's start time (clock ticks since boot; 0 if
	// unread).
	start uint64
	// exited is closed when the server's main process has ended; status is
	// valid after that.
	exited chan struct{}
	status *evidence.Exit
	// finished is closed once the supervisor has reported the tree's end
	// (done is valid after that) or has exited.
	finished chan struct{}
	done     supEvent
	// detached is set (under sup.ctlMu) once the supervisor has gone on to
	// wait for the next server: no command of this one may reach it.
	detached bool
	// warning is what the supervisor could not set up.
	warning string
	// stopping is set before bmx signals the group, so an exit it caused is
	// not taken for a crash.
	stopping bool
	// adopted names the processes that outlived the supervisor and that
	// bmx, their subreaper then, killed (see killAdopted).
	adopted []string
	// harness says how bmx's own machinery failed under the server (its
	// supervisor died before the server's exit was seen); valid once
	// exited is closed.
	harness error
	// supKilled is set when bmx killed the supervisor itself (it did not
	// report the tree's end in time); follow reads it from its goroutine.
	supKilled atomic.Bool
}

// HarnessError is a failure of bmx's own machinery in starting or holding a
// server (its supervisor, a pipe, a file descriptor), not of the server:
// the cell it met has no verdict, since a correct backend would read as a
// crash (a sweep run with `ulimit -n 16`, a supervisor killed under a
// cell).
type HarnessError struct{ Err error }

func (e *HarnessError) Error() string { return e.Err.Error() }
func (e *HarnessError) Unwrap() error { return e.Err }

// harnessf is a *HarnessError of the message.
func harnessf(format string, args ...any) error {
	return &HarnessError{Err: fmt.Errorf(format, args...)}
}

// alive reports whether the main process is still running.
func (s *process) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// exit describes how the process ended, or nil if it is alive or bmx stopped it.
func (s *process) exit() *evidence.Exit {
	if s.alive() || s.stopping {
		return nil
	}
	return s.status
}

// teardownProblems says what the teardown of s found: processes that had
// left the server's process group, processes that could not be killed, and
// what the supervisor could not set up.
func (s *process) teardownProblems() []string {
	var out []string
	if s.warning != "" {
		out = append(out, "supervisor: "+s.warning)
	}
	if n := s.done.Escaped; n > 0 {
		what := fmt.Sprintf("%d processes had left the server's process group (setsid, a double fork) and were killed with its tree", n)
		if n == 1 {
			what = "1 process had left the server's process group (setsid, a double fork) and was killed with its tree"
		}
		if len(s.done.Escapees) > 0 {
			what += ": " + strings.Join(s.done.Escapees, "; ")
		}
		out = append(out, what)
	}
	if n := len(s.adopted); n > 0 {
		out = append(out, fmt.Sprintf("%d processes outlived the server's supervisor (%s) and were killed by bmx: %s", n, s.sup.cmd.ProcessState, strings.Join(s.adopted, "; ")))
	}
	if len(s.done.Left) > 0 {
		out = append(out, fmt.Sprintf("%d processes still alive %s after SIGKILL (uninterruptible sleep?): pids %v", len(s.done.Left), treeKillWait, s.done.Left))
	}
	return out
}

// registry holds the servers that are running, so an emergency exit can kill
// them all.
type registry struct {
	mu      sync.Mutex
	servers map[*process]bool
	markers map[string]bool
}

var active = &registry{servers: map[*process]bool{}, markers: map[string]bool{}}

func (r *registry) add(s *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers[s] = true
}

func (r *registry) remove(s *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.servers, s)
}

// TrackRun has KillAll kill, too, every process that carries a marker
// starting with prefix (MarkerPrefix of a run in progress), whether or not
// its server is still running.
func TrackRun(prefix string) { active.addMarker(prefix) }

func (r *registry) addMarker(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markers[prefix] = true
}

// MarkerPrefix is what every marker of run's servers starts with, and no
// other run's: run then "//", which a cleaned path never holds, so not
// even a run in a directory inside this run's matches it.
func MarkerPrefix(run string) string { return run + "//" }

// CellMarker is the marker of one attempt of a cell's server in run.
func CellMarker(run, cell string, attempt int) string {
	return MarkerPrefix(run) + cell + "#" + strconv.Itoa(attempt)
}
