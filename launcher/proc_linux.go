//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/classify"
)

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
// holds MarkerEnv with a value starting with prefix, waits (up to
// markedKillWait) until they are gone, and returns how many it killed. It reads
// /proc/<pid>/environ, which needs the same user (or root); a zombie's is
// empty, so the dead are not counted twice.
func KillMarked(prefix string) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(markedKillWait)
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
		time.Sleep(markedKillPoll)
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

// CanSweep says whether this OS can run a sweep: Linux can (process groups,
// Pdeathsig, /proc for the environment markers).
func CanSweep() error { return nil }
