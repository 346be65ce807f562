//go:build linux

package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
	"golang.org/x/sys/unix"
)

// The supervisor is bmx re-executed (SuperviseArg) between bmx and one
// server. It is a child subreaper (PR_SET_CHILD_SUBREAPER): every process
// of the server's tree that loses its parent is re-parented to it, whatever
// it did to leave (setsid, a double fork, a cleared environment), so the
// whole tree stays findable as its descendants. It kills that tree when bmx
// says the cell is over, when bmx dies (its control pipe reads EOF, and
// Pdeathsig sends it SIGTERM), or when it is itself asked to stop. Only a
// SIGKILL of the supervisor itself escapes it; the server then still dies
// by its own Pdeathsig, and the rest of the tree is re-parented to bmx, a
// child subreaper too, which kills it (see killAdopted; the marker is the
// last resort where bmx cannot be a subreaper).
//
// The protocol: fd 3 is the control pipe from bmx (a superviseSpec as JSON,
// then lines "term", "kill"); fd 4 carries supEvent JSON lines back. The
// server's stdout and stderr are its log, which the supervisor opens and
// never writes: the log is the server's.

// spareIdle is how long a supervisor waits for its next spec before it
// exits: a spare kept for a cell that never came (the sweep ended).
const spareIdle = time.Minute

// Supervise is the supervisor's main. What it starts (superviseSpec) is a
// line on its control pipe; once that server's tree has ended on bmx's
// "kill", it waits for the next spec, so one supervisor serves a slot's
// cells one after another. It returns the process's exit status.
func Supervise(args []string) int {
	// The server's Pdeathsig fires when the thread that forked it exits;
	// this goroutine keeps its thread for the supervisor's whole life.
	runtime.LockOSThread()
	if !isPipe(3) || !isPipe(4) || len(args) > 0 {
		fmt.Fprintln(os.Stderr, "bmx: "+SuperviseArg+" is started by bmx sweep, not by hand")
		return 2
	}
	ctl, out := os.NewFile(3, "control"), os.NewFile(4, "events")
	syscall.CloseOnExec(3) // the server must not hold bmx's pipes
	syscall.CloseOnExec(4)
	enc := json.NewEncoder(out)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// lines carries the control pipe's lines; it is closed at EOF (bmx is
	// gone, or dropped this supervisor).
	lines := make(chan string, 4)
	go func() {
		r := bufio.NewReader(ctl)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(line)
		}
	}()
	self := os.Getpid()
	for {
		spec, ok := nextSpec(lines, sigs, enc)
		if !ok {
			return 0
		}
		pid, subreaper, ok := forkServer(spec, enc)
		if !ok {
			return 0
		}
		t := &tree{self: self, server: pid, enc: enc, subreaper: subreaper}
		if !t.serve(sigs, lines) {
			return 0
		}
	}
}

// nextSpec waits for what to start next. It is false when there is nothing
// to start: bmx is gone or dropped this supervisor, a signal asks it to
// end, the spec is bad (reported as an "error" event), or none came within
// spareIdle. Children that end meanwhile (a process left by the last tree
// that finally died) are reaped.
func nextSpec(lines <-chan string, sigs <-chan os.Signal, enc *json.Encoder) (superviseSpec, bool) {
	var spec superviseSpec
	idle := time.NewTimer(spareIdle)
	defer idle.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return spec, false
			}
			if line == "term" || line == "kill" {
				continue // late, for a tree that has ended
			}
			if err := json.Unmarshal([]byte(line), &spec); err != nil || len(spec.Argv) == 0 {
				_ = enc.Encode(supEvent{Event: "error", Error: fmt.Sprintf("supervisor: bad spec (%v)", err), Harness: true})
				return spec, false
			}
			return spec, true
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				return spec, false
			}
			reapAll()
		case <-idle.C:
			return spec, false
		}
	}
}

// reapAll reaps every child that has ended.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

// forkServer becomes a child subreaper and starts the server in a process
// group of its own, its output appended to its log, and reports "started"
// (or "error"). It is false when the server did not start.
func forkServer(spec superviseSpec, enc *json.Encoder) (pid int, subreaper, ok bool) {
	log, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0) // never through a link
	if err != nil {
		_ = enc.Encode(supEvent{Event: "error", Error: "open the server's log: " + err.Error(), Harness: true})
		return 0, false, false
	}
	var warning string
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		warning = "no child subreaper (" + err.Error() + "): a process that leaves the server's tree is found by its marker only"
	}
	pid, err = syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: []uintptr{0, log.Fd(), log.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	log.Close()
	if err != nil {
		_ = enc.Encode(supEvent{Event: "error", Error: (&os.PathError{Op: "fork/exec", Path: spec.Path, Err: err}).Error(), Harness: harnessErrno(err)})
		return 0, false, false
	}
	_ = enc.Encode(supEvent{Event: "started", PID: pid, Warning: warning})
	return pid, warning == "", true
}

// harnessErrno says whether a fork/exec failed for want of what bmx itself
// must have (file descriptors, memory, processes) or on an argument no
// process can take (a NUL byte): not the server's failure, as a missing or
// unrunnable executable is.
func harnessErrno(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serve reaps the tree as its processes end and kills it when bmx says
// "kill" (or is gone), or the supervisor gets SIGTERM, SIGINT or SIGHUP;
// "term" sends SIGTERM to the server's process group, and the tree is
// ended as soon as the server has exited after it with no child left, as
// bmx's "kill" would (a late "kill" is then ignored by nextSpec). It is
// true when the tree ended on bmx's "kill" or "term": the supervisor can
// take the next server.
func (t *tree) serve(sigs <-chan os.Signal, lines <-chan string) bool {
	// A SIGCHLD can be dropped while the channel is full; the tick reaps
	// what it missed.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if t.reapTerm() {
				return true
			}
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				if t.reapTerm() {
					return true
				}
				continue
			}
			// bmx's forking thread died (Pdeathsig) or someone outside
			// bmx signalled the supervisor: the server's end is bmx's
			// failure, not the server's crash, and the exit says so.
			t.endedBy = sig.String()
			t.end()
			return false
		case c, ok := <-lines:
			switch {
			case !ok: // bmx is gone: nothing of its cell may outlive it
				t.end()
				return false
			case c == "term":
				t.terming = true
				_ = syscall.Kill(-t.server, syscall.SIGTERM)
				if t.reapTerm() {
					return true
				}
			case c == "kill":
				t.end()
				return true
			}
		}
	}
}

// isPipe reports whether fd is an open pipe, as bmx's two are.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// tree is the supervisor's view of the server's processes.
type tree struct {
	self, server int
	enc          *json.Encoder
	exited       bool
	// terming is set once bmx has said "term": bmx ends the tree as soon
	// as the server has exited then (see process.stop), so the supervisor
	// ends it itself once nothing of it is left running (reapTerm).
	terming bool
	// endedBy names the signal on which the supervisor ended the tree
	// itself ("" when bmx asked or the server ended on its own).
	endedBy string
	// subreaper is set when the supervisor is a child subreaper: then every
	// live process of the tree descends from a live child of its own.
	subreaper bool
}

// reapTerm reaps, and ends the tree once the server has exited after bmx's
// "term" and left no child behind (all of the tree ended by its own SIGTERM
// handlers); true when it did. Processes still shutting down when the server
// has exited are left to bmx's "kill", as before.
func (t *tree) reapTerm() bool {
	if none := t.reap(); t.terming && t.exited && none {
		t.end()
		return true
	}
	return false
}

// reap collects every child that has ended, and reports the server's own
// exit once. It is true when the supervisor has no child left at all.
func (t *tree) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return err == syscall.ECHILD
		}
		if pid == t.server && !t.exited {
			t.exited = true
			ev := supEvent{Event: "exit", Code: ws.ExitStatus()}
			if ws.Signaled() {
				ev.Code, ev.Signal = -1, signalName(ws.Signal())
			}
			if t.endedBy != "" {
				ev.Harness = true
				ev.Error = "the server's supervisor got " + t.endedBy + " from outside bmx and ended the server"
			}
			_ = t.enc.Encode(ev)
		}
	}
}

// end SIGKILLs the server's group and every descendant until none is left
// (or treeKillWait passes), reaps them and reports.
func (t *tree) end() {
	_ = syscall.Kill(-t.server, syscall.SIGKILL)
	killed, escaped := map[int]bool{}, []string{}
	deadline := time.Now().Add(treeKillWait)
	var left []proc
	for {
		if t.reap() && t.subreaper {
			// A subreaper without children has no descendants: whatever
			// the server started was re-parented to it as its parent died.
			// The scan of every process on the host is not needed.
			left = nil
			break
		}
		left = descendants(t.self)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		for _, p := range left {
			// An escapee is named by its command line, read before the kill.
			cmd := ""
			if p.pgrp != t.server && !killed[p.pid] {
				cmd = cmdline(p.pid)
			}
			if killProc(p, t.self) && !killed[p.pid] {
				killed[p.pid] = true
				if p.pgrp != t.server {
					escaped = append(escaped, fmt.Sprintf("pid %d: %s", p.pid, cmd))
				}
			}
		}
		time.Sleep(treeKillPoll)
	}
	t.reap()
	done := supEvent{Event: "done", Killed: len(killed), Escaped: len(escaped), Escapees: escaped}
	for _, p := range left {
		done.Left = append(done.Left, p.pid)
	}
	if !t.exited { // it cannot have ended unseen: this is a last resort
		done.Warning = "the server's exit status was not seen"
	}
	_ = t.enc.Encode(done)
}

// maxCmdline bounds a command line quoted in a report.
const maxCmdline = 200

// cmdline is a process's command line as one line, secrets redacted,
// clipped to maxCmdline runes; its name in brackets when it has none.
func cmdline(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(data) == 0 {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return "[" + strings.TrimSpace(string(comm)) + "]"
	}
	argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	line := strings.Join(matrix.RedactArgv(argv), " ")
	if r := []rune(line); len(r) > maxCmdline {
		line = string(r[:maxCmdline]) + "…"
	}
	return line
}

// proc is one line of /proc/<pid>/stat, the fields the supervisor needs.
type proc struct {
	pid, ppid, pgrp int
	state           byte
	// start is when the process started, in clock ticks since boot.
	start uint64
}

// readProc reads /proc/<pid>/stat.
func readProc(pid int) (proc, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0], start: start}, true
}

// descendants lists the live (not zombie) processes below root.
func descendants(root int) []proc {
	children := map[int][]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			if c.state != 'Z' && c.state != 'X' {
				out = append(out, c)
			}
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// killProc SIGKILLs p if it is still the process that was listed: it takes
// a pidfd and checks that the process behind it still has p's parent, so a
// pid reused by an unrelated process since the listing is never signalled.
func killProc(p proc, self int) bool {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, syscall.ENOSYS) { // before Linux 5.3
		return syscall.Kill(p.pid, syscall.SIGKILL) == nil
	}
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	now, ok := readProc(p.pid)
	if !ok || (now.ppid != p.ppid && now.ppid != self) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// supervisorPath is the running bmx executable, even if its file was
// replaced or removed since it started (a nightly upgrade during a sweep).
var supervisorPath = filepath.Join("/proc", "self", "exe")
