//go:build linux

package server

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bmx is a child subreaper too. A supervisor holds its server's tree, but
// the supervisor itself can be SIGKILLed (the OOM killer, a user's kill -9);
// its server then dies by its own Pdeathsig, and what the server had
// started is re-parented to the nearest subreaper above it. Without bmx
// being one that is init, and a process that left the server's process
// group and cleared its environment (setsid env -i) is then found by
// nothing. As a subreaper, bmx adopts them: when a supervisor ends without
// its report of the tree's end, bmx kills every process it adopted
// (killAdopted) and reaps them.
//
// An adopted process is told from a child bmx started itself by three
// things: bmx did not start it as a supervisor (those are listed in
// adoption.supervisors from before their fork until they are reaped), it is
// not in bmx's process group (everything else bmx starts stays in it,
// while a server's tree is in the server's group or in groups and sessions
// of its own), and it started after the supervisor that held it. bmx reaps
// only processes it killed as adopted, by their pid, so it never takes an
// exit status that os/exec waits for.
var adoption = struct {
	once sync.Once
	// warning says why bmx is no subreaper ("" when it is one).
	warning string
	mu      sync.Mutex
	// supervisors are the pids of the supervisors bmx started and has not
	// reaped yet.
	supervisors map[int]bool
	// killed are the adopted processes bmx killed and has not reaped yet.
	killed map[int]bool
}{supervisors: map[int]bool{}, killed: map[int]bool{}}

// adoptOrphans makes bmx a child subreaper, once, and starts the reaper of
// the processes it adopts and kills: it reaps them when SIGCHLD says a
// child ended (a signal that arrives while the channel is full needs no
// second reap: the one it queues behind reaps every killed pid).
func adoptOrphans() {
	adoption.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			adoption.warning = "bmx is no child subreaper (" + err.Error() + "): what outlives a SIGKILLed supervisor is found by its marker only"
			return
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGCHLD)
		go func() {
			for range sigs {
				adoption.mu.Lock()
				reapKilled()
				adoption.mu.Unlock()
			}
		}()
	})
}

// reapKilled reaps the killed adopted processes that have ended. The caller
// holds adoption.mu.
func reapKilled() {
	for pid := range adoption.killed {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || err == syscall.ECHILD {
			delete(adoption.killed, pid)
		}
	}
}

// startSupervisor runs start (the fork of a supervisor) with the adoption
// lock held, and lists the pid it returns as a supervisor's, so the
// supervisor is never taken for an adopted process. It returns the
// supervisor's start time (see since).
func startSupervisor(start func() (int, error)) (uint64, error) {
	adoptOrphans()
	adoption.mu.Lock()
	defer adoption.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, err
	}
	adoption.supervisors[pid] = true
	p, _ := readProc(pid)
	return p.start, nil
}

// supervisorGone takes a reaped supervisor off the list.
func supervisorGone(pid int) {
	adoption.mu.Lock()
	defer adoption.mu.Unlock()
	delete(adoption.supervisors, pid)
}

// killAdopted SIGKILLs every process bmx adopted that started at or after
// since (a dead supervisor's start time, in clock ticks since boot), with
// all its descendants, until none is left or treeKillWait has passed, and
// reaps them. It returns what it killed: "pid 123: sleep 600".
func killAdopted(since uint64) []string {
	self := os.Getpid()
	pgrp := syscall.Getpgrp()
	var names []string
	seen := map[int]bool{}
	deadline := time.Now().Add(treeKillWait)
	for {
		adoption.mu.Lock()
		live := 0
		for _, p := range children(self) {
			if adoption.supervisors[p.pid] || p.pgrp == pgrp || p.start < since {
				continue
			}
			tree := descendants(p.pid)
			if p.state == 'Z' || p.state == 'X' {
				// A zombie leader of a server whose other threads are still
				// exiting: its children are re-parented to bmx only when the
				// last thread ends, so they are its descendants until then.
				// Scan once more after it is reaped: what its threads held
				// is bmx's by then.
				adoption.killed[p.pid] = true // reaped below
				live++
			} else {
				tree = append(tree, p)
			}
			if len(tree) > 0 && p.state != 'Z' && p.state != 'X' {
				live++
			}
			for _, d := range tree {
				if !seen[d.pid] {
					name := fmt.Sprintf("pid %d: %s", d.pid, cmdline(d.pid))
					if killProc(d, self) {
						seen[d.pid] = true
						names = append(names, name)
					}
				}
			}
			adoption.killed[p.pid] = true
		}
		reapKilled()
		adoption.mu.Unlock()
		if live == 0 || time.Now().After(deadline) {
			return names
		}
		time.Sleep(treeKillPoll)
	}
}

// children lists the processes whose parent is pid, zombies included.
func children(pid int) []proc {
	var out []proc
	forEachProc(func(p int, dir string) {
		if c, ok := readProc(p); ok && c.ppid == pid {
			out = append(out, c)
		}
	})
	return out
}
