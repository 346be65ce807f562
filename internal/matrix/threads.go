package matrix

import (
	"slices"
	"strconv"
	"strings"
)

// threadFlags are the flags by which a server is told its CPU threads
// (llama.cpp's llama-server: -t, --threads).
var threadFlags = []string{"-t", "--threads"}

// ServerThreads is the thread count a server's argv gives it (-t N,
// --threads N or --threads=N), 1 when it gives none: what the launcher
// warns of before slots share the CPUs, and the perf report after.
func ServerThreads(argv []string) int {
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
