package launcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/matrix"
)

// threadFlags are the flags by which a server is told its CPU threads
// (llama.cpp's llama-server: -t, --threads), as the perf report reads them.
var threadFlags = []string{"-t", "--threads"}

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
	threads := serverThreads(cfg.Render(cfg.Server.Command, matrix.Runtime{Self: self}))
	if slots*threads <= cpus {
		return ""
	}
	return fmt.Sprintf("%d slots run servers of %d thread(s) each at once on %d CPUs: they share the CPUs, so cells running at the same time slow each other (speed figures, timeouts); measure speed with --slots %d",
		slots, threads, cpus, max(cpus/threads, 1))
}

// serverThreads is the thread count argv gives the server (-t N,
// --threads N or --threads=N), 1 when it gives none.
func serverThreads(argv []string) int {
	for i, a := range argv {
		v := ""
		if f, val, ok := strings.Cut(a, "="); ok && slices.Contains(threadFlags, f) {
			v = val
		} else if slices.Contains(threadFlags, a) && i+1 < len(argv) {
			v = argv[i+1]
		}
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 1
}
