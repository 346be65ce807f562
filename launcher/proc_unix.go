//go:build unix

package launcher

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/classify"
)

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
func start(argv, env []string, log *os.File) (*server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		s.state = cmd.ProcessState
		close(s.exited)
	}()
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
