//go:build linux

package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/classify"
)

// MarkerEnv is set in every server's environment to "<run>/<cell>#<attempt>".
// Descendants inherit it, so bmx can find a process that left the server's
// process group (setsid, a double fork) and kill it.
const MarkerEnv = "BMX_MARKER"

// server is one running server process and its process group.
type server struct {
	cmd *exec.Cmd
	pid int
	// exited is closed by the one goroutine that owns Wait; state is valid
	// after that.
	exited chan struct{}
	state  *os.ProcessState
	// stopping is set before bmx signals the group, so an exit it caused is
	// not taken for a crash.
	stopping bool
}

// start launches argv in its own process group with stdout and stderr going
// straight to log (a file: the child writes it directly, so bmx never holds
// the log in memory, and a grandchild that keeps the file open cannot block
// Wait the way an inherited pipe would).
//
// The child gets Pdeathsig=SIGKILL, so it dies if bmx is killed outright.
// Linux sends it when the thread that forked the child exits, and Go retires
// idle threads; the goroutine that starts the child therefore locks its
// thread and keeps it, waiting on the child, until the child is gone.
func start(argv, env []string, log *os.File) (*server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s := &server{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.pid = cmd.Process.Pid
		active.add(s)
		started <- nil
		_ = cmd.Wait() // the exit status is read from ProcessState
		s.state = cmd.ProcessState
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return s, nil
}

// alive reports whether the main process is still running.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// exit describes how the process ended, or nil if it is alive or bmx stopped it.
func (s *server) exit() *classify.Exit {
	if s.alive() || s.stopping {
		return nil
	}
	return exitOf(s.state)
}

func exitOf(ps *os.ProcessState) *classify.Exit {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &classify.Exit{Code: -1, Signal: signalName(ws.Signal())}
	}
	return &classify.Exit{Code: ps.ExitCode()}
}

func signalName(sig syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGABRT: "SIGABRT", syscall.SIGINT: "SIGINT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL", syscall.SIGFPE: "SIGFPE",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGHUP: "SIGHUP",
	}
	if n, ok := names[sig]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(sig))
}

// stop ends the whole process group: SIGTERM, up to grace for the main
// process to exit, then SIGKILL; and SIGKILL to the group once more so no
// descendant that ignored SIGTERM outlives the cell. It returns how the
// server ended ("" if it had already exited by itself).
func (s *server) stop(grace time.Duration) string {
	defer active.remove(s)
	if !s.alive() {
		// The main process is gone; its descendants may not be.
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		return ""
	}
	s.stopping = true
	how := "SIGTERM"
	_ = syscall.Kill(-s.pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		how = fmt.Sprintf("SIGKILL after %s grace (SIGTERM ignored)", grace)
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		<-s.exited
	}
	_ = syscall.Kill(-s.pid, syscall.SIGKILL) // stragglers in the group; ESRCH when none
	return how
}

// groupPIDs lists the live processes of the server's process group.
func (s *server) groupPIDs() []int {
	var pids []int
	forEachProc(func(pid int, dir string) {
		data, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			return
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		rest := data[bytes.LastIndexByte(data, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(s.pid) {
			pids = append(pids, pid)
		}
	})
	return pids
}

func forEachProc(f func(pid int, dir string)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f(pid, filepath.Join("/proc", e.Name()))
	}
}

// KillMarked SIGKILLs every process (bmx itself excepted) whose environment
// holds MarkerEnv with a value starting with prefix, waits (up to 3 s) until
// they are gone, and returns how many it killed. It reads
// /proc/<pid>/environ, which needs the same user (or root); a zombie's is
// empty, so the dead are not counted twice.
func KillMarked(prefix string) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(3 * time.Second)
	for {
		found := marked(prefix)
		if len(found) == 0 || time.Now().After(deadline) {
			return len(killed)
		}
		for _, pid := range found {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marked lists the processes that carry a marker starting with prefix.
func marked(prefix string) []int {
	want := []byte(MarkerEnv + "=" + prefix)
	self := os.Getpid()
	var pids []int
	forEachProc(func(pid int, dir string) {
		if pid == self {
			return
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			return
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, want) {
				pids = append(pids, pid)
				return
			}
		}
	})
	return pids
}

// registry holds the servers that are running, so an emergency exit can kill
// them all.
type registry struct {
	mu      sync.Mutex
	servers map[*server]bool
	markers map[string]bool
}

var active = &registry{servers: map[*server]bool{}, markers: map[string]bool{}}

func (r *registry) add(s *server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers[s] = true
}

func (r *registry) remove(s *server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.servers, s)
}

func (r *registry) addMarker(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markers[prefix] = true
}

// KillAll SIGKILLs every running server's process group and every process
// that carries a marker of a run in progress. It is for the second SIGINT,
// when bmx exits at once: no server may outlive it.
func KillAll() {
	active.mu.Lock()
	defer active.mu.Unlock()
	for s := range active.servers {
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	for m := range active.markers {
		KillMarked(m)
	}
}

// waitPortFree waits until host:port can be bound again, so the next cell
// (or a rerun) does not meet the last server's socket.
func waitPortFree(host string, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still in use %s after the server stopped: %w", port, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort asks the kernel for a free port on host.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}
