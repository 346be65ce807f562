//go:build linux

package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/classify"
)

// start launches argv under a supervisor (see Supervise): bmx re-executed
// in its own process group, a child subreaper that starts the server in a
// process group of its own and kills the server's whole tree when told to,
// when bmx dies, or when the cell ends. stdout and stderr go straight to log
// (the supervisor opens the file by its path, appending: the server writes
// it directly, so bmx never holds the log in memory, and a grandchild that
// keeps the file open cannot block Wait the way an inherited pipe would).
//
// The supervisor is told what to start on its control pipe, so one can be
// started ahead of its cell: a server's teardown starts a spare (see
// spares), and the next cell takes it instead of waiting for bmx to start
// again as a supervisor (about 10 ms on two cores).
func start(argv, env []string, log *os.File) (*process, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	logPath, err := filepath.Abs(log.Name())
	if err != nil {
		return nil, err
	}
	// The server runs in bmx's working directory as it is now: a spare
	// supervisor was started earlier, maybe in another one.
	wd, _ := os.Getwd()
	spec, err := json.Marshal(superviseSpec{Path: path, Argv: argv, Env: env, Log: logPath, Dir: wd})
	if err != nil {
		return nil, err
	}
	var srv *process
	s, ok := takeSpare(), false
	if s != nil {
		srv, ok = s.begin(spec)
	}
	if !ok {
		// No spare, or one that has gone (its idle time ran out): start
		// a supervisor now.
		if s, err = spawnSupervisor(); err != nil {
			return nil, err
		}
		srv, _ = s.begin(spec)
	}
	if srv == nil {
		return nil, s.startErr
	}
	return srv, nil
}

// superviseSpec is what a supervisor starts: the first line on its control
// pipe.
type superviseSpec struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Log  string   `json:"log"`
	// Dir is the server's working directory ("": the supervisor's own).
	Dir string `json:"dir,omitempty"`
}

// spares holds supervisors started ahead of their cells, at most one per
// slot that is tearing a server down.
var spares = make(chan *process, 2)

// takeSpare returns a waiting supervisor, or nil.
func takeSpare() *process {
	select {
	case s := <-spares:
		return s
	default:
		return nil
	}
}

// refillSpares starts a supervisor for the next cell, unless enough wait.
func refillSpares() {
	if len(spares) == cap(spares) {
		return
	}
	s, err := spawnSupervisor()
	if err != nil {
		return
	}
	select {
	case spares <- s:
	default:
		s.discard()
	}
}

// spawnSupervisor starts bmx as a supervisor waiting for its spec.
//
// It gets Pdeathsig=SIGTERM and reads EOF on its control pipe when bmx
// dies, either of which makes it kill the tree (or, still waiting, exit).
// Linux sends the Pdeathsig when the thread that forked the child exits,
// and Go retires threads; the goroutine that starts the supervisor
// therefore locks its thread and keeps it, waiting on the supervisor, until
// it is gone.
func spawnSupervisor() (*process, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervisor pipe: %w", err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("supervisor pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        supervisorPath,
		Args:        []string{"bmx", SuperviseArg},
		ExtraFiles:  []*os.File{ctlR, evW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
	s := &process{cmd: cmd, ctl: ctlW, evR: evR, exited: make(chan struct{}), gone: make(chan struct{}), finished: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		since, err := startSupervisor(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
		s.since = since
		ctlR.Close() // the supervisor's ends: EOF reaches each side when the other is gone
		evW.Close()
		started <- err
		if err != nil {
			return
		}
		_ = cmd.Wait() // the exit status is read from ProcessState
		supervisorGone(cmd.Process.Pid)
		close(s.gone)
	}()
	if err := <-started; err != nil {
		ctlW.Close()
		evR.Close()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	return s, nil
}

// begin sends the spec and waits for the server's start. ok is false when
// the supervisor was gone before it read the spec (a spare past its idle
// time); srv is nil and s.startErr says why when the server did not start.
func (s *process) begin(spec []byte) (srv *process, ok bool) {
	s.ctlMu.Lock()
	_, err := s.ctl.Write(append(spec, '\n'))
	s.ctlMu.Unlock()
	events := json.NewDecoder(s.evR)
	var first supEvent
	if err == nil {
		err = events.Decode(&first)
	}
	if err != nil || first.Event != "started" {
		<-s.gone
		s.ctl.Close()
		s.evR.Close()
		switch {
		case first.Event == "error":
			s.startErr = errors.New(first.Error)
			return nil, true
		case first.Event == "":
			s.startErr = fmt.Errorf("supervisor ended before the server started (%v, %s)", err, s.cmd.ProcessState)
			return nil, false
		}
		s.startErr = fmt.Errorf("supervisor ended before the server started (%s)", s.cmd.ProcessState)
		return nil, true
	}
	s.pid, s.warning = first.PID, first.Warning
	active.add(s)
	go s.follow(events, s.evR)
	return s, true
}

// discard ends a spare that no cell will take.
func (s *process) discard() {
	s.ctl.Close() // EOF before a spec: it exits
	go func() {
		<-s.gone
		s.evR.Close()
	}()
}

// follow reads the supervisor's events until it exits: the server's exit,
// then the account of the teardown.
func (s *process) follow(events *json.Decoder, r *os.File) {
	defer r.Close()
	defer close(s.finished)
	for {
		var ev supEvent
		if events.Decode(&ev) != nil {
			break
		}
		switch ev.Event {
		case "exit":
			s.status = &classify.Exit{Code: ev.Code, Signal: ev.Signal}
			close(s.exited)
		case "done":
			s.done = ev
		}
	}
	<-s.gone
	if s.status == nil {
		// The supervisor died without a word (SIGKILLed): its server died
		// with it by its own Pdeathsig.
		s.status = exitOf(s.cmd.ProcessState)
		close(s.exited)
	}
	if s.done.Event != "done" || len(s.done.Left) > 0 {
		// The supervisor did not see its tree end (it was killed), or left
		// processes it could not kill: what it held is bmx's now.
		s.adopted = killAdopted(s.since)
	}
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

// stop ends the server: SIGTERM to its process group, up to grace for the
// main process to exit, then SIGKILL; then the supervisor kills everything
// left of the tree, in the group or not. It returns how the server ended
// ("" if it had already exited by itself).
func (s *process) stop(grace time.Duration) string {
	defer active.remove(s)
	// The next cell's supervisor starts while this one tears down.
	go refillSpares()
	if !s.alive() {
		s.end() // the main process is gone; its descendants may not be
		return ""
	}
	s.stopping = true
	how := "SIGTERM"
	s.send("term")
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		how = fmt.Sprintf("SIGKILL after %s grace (SIGTERM ignored)", grace)
	}
	s.end()
	return how
}

// end has the supervisor kill the whole tree and waits until it has
// reported and exited. If it does not in time (it cannot: it bounds its own
// work), the group and the supervisor are killed from here.
func (s *process) end() {
	s.send("kill")
	t := time.NewTimer(treeKillWait + 5*time.Second)
	defer t.Stop()
	select {
	case <-s.finished:
	case <-t.C:
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		_ = s.cmd.Process.Kill()
		<-s.finished
	}
}

// send writes a command to the supervisor; a supervisor that is gone has
// nothing left to act on.
func (s *process) send(cmd string) {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	if s.ctl == nil {
		return
	}
	if _, err := s.ctl.WriteString(cmd + "\n"); err != nil || cmd == "kill" {
		s.ctl.Close()
		s.ctl = nil
	}
}

// groupPIDs lists the live processes of the server's process group.
func (s *process) groupPIDs() []int {
	var pids []int
	forEachProc(func(pid int, dir string) {
		if p, ok := readProc(pid); ok && p.state != 'Z' && p.pgrp == s.pid {
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

// KillAll has the supervisor of every running server kill its tree, and
// SIGKILLs every process that carries a marker of a run in progress. It is for the second SIGINT,
// when bmx exits at once: no server may outlive it.
func KillAll() {
	active.mu.Lock()
	defer active.mu.Unlock()
	for s := range active.servers {
		s.send("kill")
	}
	for m := range active.markers {
		KillMarked(m)
	}
}

// CanSweep says whether this OS can run a sweep: Linux can (child
// subreapers, Pdeathsig, process groups, /proc).
func CanSweep() error { return nil }
