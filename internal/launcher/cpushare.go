package launcher

import (
	"fmt"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// CPUShare is a warning, before any server starts, when the slots' servers
// will share the CPUs: more than one slot runs at once, on a host with
// fewer CPUs than the slots times the threads each server is told to use
// (one where its command does not say). Cells that run at the same time
// then slow each other: their speed figures are not comparable, and a
// ready or request timeout fits one server alone. The perf report says the
// same of the figures afterwards ("these figures share the CPU"); "" when
// the servers cannot share the CPUs.
func CPUShare(cfg *matrix.Config, slots int, self string, cpus int) string {
	if slots < 2 || cpus < 1 {
		return ""
	}
	threads := matrix.ServerThreads(cfg.Render(cfg.Server.Command, matrix.Runtime{Self: self}))
	if slots*threads <= cpus {
		return ""
	}
	return fmt.Sprintf("%d slots run servers of %d thread(s) each at once on %d CPUs: they share the CPUs, so cells running at the same time slow each other (speed figures, timeouts); measure speed with --slots %d",
		slots, threads, cpus, max(cpus/threads, 1))
}
