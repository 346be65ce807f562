//go:build !linux

package server

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// errNoSweep is why this OS cannot sweep.
var errNoSweep = fmt.Errorf("%w: sweep needs Linux, where each server runs in its own process group that dies with bmx (Pdeathsig); on %s, report, diff, classify, plan, init, axes and probe work", ErrUnsupported, runtime.GOOS)

// CanSweep says whether this OS can run a sweep. Only Linux can: bmx must
// never leave a server holding GPUs behind, and only Linux lets it kill a
// server's whole process tree even when bmx itself is killed.
func CanSweep() error { return errNoSweep }

// Supervise refuses: see CanSweep.
func Supervise(args []string) int {
	fmt.Fprintln(os.Stderr, "bmx: "+SuperviseArg+": "+errNoSweep.Error())
	return 2
}

// start refuses: see CanSweep.
func start(argv, env []string, log *os.File) (*process, error) { return nil, errNoSweep }

func exitOf(ps *os.ProcessState) *evidence.Exit { return &evidence.Exit{Code: ps.ExitCode()} }

func (s *process) stop(grace time.Duration) string { return "" }

func (s *process) groupPIDs() []int { return nil }

func (s *process) heldWhole() bool { return false }

// Prespawn has nothing to start: no server starts on this OS.
func Prespawn(n int) {}

// KillMarked finds no marked process where there is no /proc.
func KillMarked(prefix string) int { return 0 }

// KillAll has nothing to kill: no server starts on this OS.
func KillAll() {}
