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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// start launches argv under a supervisor (see Supervise): bmx re-executed
// in its own process group, a child subreaper that starts the server in a
// process group of its own and kills the server's whole tree when told to,
// when bmx dies, or when the cell ends. stdout and stderr go straight to log
// (the supervisor opens the file by its path, appending: the server writes
// it directly, so bmx never holds the log in memory, and a grandchild that
// keeps the file open cannot block Wait the way an inherited pipe would).
//
// The supervisor is told what to start on its control pipe, one server
// after another: a supervisor whose server's tree has ended cleanly waits
// for the next (see spares), so a slot's cells share one supervisor instead
// of paying for bmx's start and exit as a supervisor on each (about 10 ms of
// CPU on two cores, beside the servers).
func start(argv, env []string, log *os.File) (*process, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	logPath, err := filepath.Abs(log.Name())
	if err != nil {
		return nil, &HarnessError{Err: err}
	}
	// The server runs in bmx's working directory as it is now: a spare
	// supervisor was started earlier, maybe in another one.
	wd, _ := os.Getwd()
	spec, err := json.Marshal(superviseSpec{Path: path, Argv: argv, Env: env, Log: logPath, Dir: wd})
	if err != nil {
		return nil, &HarnessError{Err: err}
	}
	var srv *process
	sup, ok := takeSpare(), false
	if sup != nil {
		srv, ok = sup.begin(spec)
	}
	if !ok {
		// No spare, or one that has gone (its idle time ran out): start
		// a supervisor now.
		if sup, err = spawnSupervisor(); err != nil {
			return nil, &HarnessError{Err: err}
		}
		srv, _ = sup.begin(spec)
	}
	if srv == nil {
		return nil, sup.startErr
	}
	return srv, nil
}

// superviseSpec is what a supervisor starts: a line on its control pipe.
type superviseSpec struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Log  string   `json:"log"`
	// Dir is the server's working directory ("": the supervisor's own).
	Dir string `json:"dir,omitempty"`
}

// spares holds the supervisors that wait for a server: each one whose
// server's tree ended cleanly, until the next cell takes it (one per slot
// in a sweep). One that finds the pool full is discarded.
var spares = make(chan *supervisor, 16)

// takeSpare returns a waiting supervisor, or nil when none waits and none
// is on its way (Prespawn) that another taker has not claimed: one on its
// way is waited for, as a supervisor started now instead would start no
// sooner, beside it, on the same CPUs.
func takeSpare() *supervisor {
	select {
	case s := <-spares:
		return s
	default:
	}
	if spawning.Load() == 0 || !claimSpawning() {
		return nil
	}
	for {
		select {
		case s := <-spares:
			return s
		case <-time.After(time.Millisecond):
		}
		if spawning.Load() == 0 { // the spawn failed, or another took it
			select {
			case s := <-spares: // one put just before this is still seen
				return s
			default:
				return nil
			}
		}
	}
}

// claimSpawning claims one of Prespawn's supervisors on their way for the
// caller; false when every one is claimed already.
func claimSpawning() bool {
	for {
		n := unclaimed.Load()
		if n <= 0 {
			return false
		}
		if unclaimed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// putSpare has sup wait for the next server, or ends it if enough wait.
func putSpare(sup *supervisor) {
	select {
	case spares <- sup:
	default:
		sup.discard()
	}
}

// Prespawn has n supervisors wait for a sweep's first cells, counting those
// already waiting or on their way (no more than the spares pool has room
// for): bmx's start as a supervisor (10 ms on a quiet two-core host, 100 ms
// on a loaded one) then overlaps with what the sweep does before its first
// server starts (the config, the checks, the run directory) instead of
// delaying each slot's first server. A sweep calls it first for one slot,
// before its config is read, then for all of them.
func Prespawn(n int) {
	for range min(n-len(spares)-int(spawning.Load()), cap(spares)-len(spares)) {
		spawning.Add(1)
		unclaimed.Add(1)
		go func() {
			if s, err := spawnSupervisor(); err == nil {
				putSpare(s)
			}
			spawning.Add(-1) // after putSpare: counted twice at worst, never missed
		}()
	}
}

// spawning counts Prespawn's supervisors on their way to the spares, and
// unclaimed those of them no taker waits for yet (a count that may stay
// above 0 once they are spares, which matters only while another is on its
// way: a taker that claims one then finds a spare, or none on its way);
// supervisorsStarted counts all the supervisors this process started.
var spawning, unclaimed, supervisorsStarted atomic.Int32

// spawnSupervisor starts bmx as a supervisor waiting for its spec.
//
// It gets Pdeathsig=SIGTERM and reads EOF on its control pipe when bmx
// dies, either of which makes it kill the tree (or, still waiting, exit).
// Linux sends the Pdeathsig when the thread that forked the child exits,
// and Go retires threads; the goroutine that starts the supervisor
// therefore locks its thread and keeps it, waiting on the supervisor, until
// it is gone.
func spawnSupervisor() (*supervisor, error) {
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
	s := &supervisor{cmd: cmd, ctl: ctlW, evR: evR, events: json.NewDecoder(evR), gone: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		since, err := startSupervisor(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			supervisorsStarted.Add(1)
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
func (s *supervisor) begin(spec []byte) (srv *process, ok bool) {
	err := s.write(append(spec, '\n'))
	var first supEvent
	if err == nil {
		err = s.events.Decode(&first)
	}
	if err != nil || first.Event != "started" {
		s.closeCtl()
		<-s.gone
		s.evR.Close()
		switch {
		case first.Event == "error" && first.Harness:
			s.startErr = &HarnessError{Err: errors.New(first.Error)}
			return nil, true
		case first.Event == "error":
			s.startErr = errors.New(first.Error)
			return nil, true
		case first.Event == "":
			s.startErr = harnessf("supervisor ended before the server started (%v, %s)", err, s.cmd.ProcessState)
			return nil, false
		}
		s.startErr = harnessf("supervisor ended before the server started (%s)", s.cmd.ProcessState)
		return nil, true
	}
	p := &process{sup: s, pid: first.PID, warning: first.Warning, exited: make(chan struct{}), finished: make(chan struct{})}
	if st, ok := readProc(first.PID); ok {
		p.start = st.start // what the server starts is never older than it
	}
	active.add(p)
	go p.follow()
	return p, true
}

// write sends data on the control pipe; an error when it is closed.
func (s *supervisor) write(data []byte) error {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	if s.ctl == nil {
		return os.ErrClosed
	}
	_, err := s.ctl.Write(data)
	return err
}

// closeCtl closes the control pipe: a supervisor that reads its EOF kills
// its tree, if it holds one, and exits.
func (s *supervisor) closeCtl() {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	if s.ctl != nil {
		s.ctl.Close()
		s.ctl = nil
	}
}

// discard ends a supervisor that no cell will take.
func (s *supervisor) discard() {
	s.closeCtl() // EOF before a spec: it exits
	go func() {
		<-s.gone
		s.evR.Close()
	}()
}

// follow reads the supervisor's events about this server: its exit, then
// the account of the teardown. A supervisor that reported a clean end of
// the tree (nothing left alive, the exit seen) waits for the next server
// among the spares; any other is ended, and once it has exited, what it
// held and bmx adopted is killed.
func (s *process) follow() {
	defer close(s.finished)
	sup := s.sup
	for {
		var ev supEvent
		if sup.events.Decode(&ev) != nil {
			break
		}
		switch ev.Event {
		case "exit":
			s.status = &evidence.Exit{Code: ev.Code, Signal: ev.Signal}
			if ev.Harness && !s.supKilled.Load() {
				s.harness = harnessf("%s", ev.Error)
			}
			close(s.exited)
		case "done":
			s.done = ev
			if s.status != nil && len(ev.Left) == 0 && ev.Warning == "" {
				sup.ctlMu.Lock()
				s.detached = true // no command of this server reaches the next
				sup.ctlMu.Unlock()
				putSpare(sup)
				return
			}
			sup.closeCtl()
		}
	}
	<-sup.gone
	sup.evR.Close()
	if s.status == nil {
		// The supervisor died without a word (SIGKILLed): its server died
		// with it by its own Pdeathsig. Unless bmx killed it at the
		// teardown, that is bmx's failure, not the server's crash. One
		// that exited 0 ended as told (bmx closed its control pipe at a
		// teardown, before the tree's exit was reported): no failure.
		s.status = exitOf(sup.cmd.ProcessState)
		if !s.supKilled.Load() && !sup.cmd.ProcessState.Success() {
			s.harness = harnessf("the server's supervisor (PID %d) ended under it (%s), and the server with it", sup.cmd.Process.Pid, sup.cmd.ProcessState)
		}
		close(s.exited)
	}
	if s.done.Event != "done" || len(s.done.Left) > 0 {
		// The supervisor did not see its tree end (it was killed), or left
		// processes it could not kill: what it held is bmx's now.
		since := sup.since
		if s.start != 0 && s.start < since {
			// The supervisor's start time read later than the server's
			// (seen under load with a reused supervisor): what the server
			// started is never older than the server itself.
			since = s.start
		}
		s.adopted = killAdopted(since)
	}
}

func exitOf(ps *os.ProcessState) *evidence.Exit {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &evidence.Exit{Code: -1, Signal: signalName(ws.Signal())}
	}
	return &evidence.Exit{Code: ps.ExitCode()}
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

// heldWhole reports whether the supervisor held the server's whole tree to
// its end: it and bmx are child subreapers (so whatever the server started
// stayed its descendant, however it left its group or environment), it saw
// the server's exit and reported the tree's end with nothing left alive.
func (s *process) heldWhole() bool {
	return adoption.warning == "" && s.warning == "" && s.status != nil &&
		s.done.Event == "done" && s.done.Warning == "" && len(s.done.Left) == 0 && len(s.adopted) == 0
}

// end has the supervisor kill the whole tree and waits until it has
// reported (and, unless it waits for the next server, exited). If it does
// not in time (it cannot: it bounds its own work), the group and the
// supervisor are killed from here.
func (s *process) end() {
	s.send("kill")
	t := time.NewTimer(treeKillWait + 5*time.Second)
	defer t.Stop()
	select {
	case <-s.finished:
	case <-t.C:
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		s.supKilled.Store(true) // before the kill: follow reads it once the supervisor is gone
		_ = s.sup.cmd.Process.Kill()
		<-s.finished
	}
}

// send writes a command to the supervisor about this server; a supervisor
// that is gone, or that has moved on to the next server, is not told.
func (s *process) send(cmd string) {
	sup := s.sup
	sup.ctlMu.Lock()
	defer sup.ctlMu.Unlock()
	if sup.ctl == nil || s.detached {
		return
	}
	if _, err := sup.ctl.WriteString(cmd + "\n"); err != nil {
		sup.ctl.Close()
		sup.ctl = nil
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
