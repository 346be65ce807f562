package main

import "strings"

// interruptNote is what bmx says on the first (n 1) and the second (n 2)
// SIGINT or SIGTERM. A sweep and a bisect stop after tearing down their
// running server, and the second signal kills it at once; any other
// command (a merge, a report, a publish) runs no server and just stops,
// removing what it had half written, so speaking of a server there would
// mislead.
func interruptNote(args []string, n int) string {
	servers := false
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			servers = a == "sweep" || a == "bisect"
			break
		}
	}
	switch {
	case servers && n == 1:
		return "stopping after tearing down the running server (again to kill it now)"
	case servers:
		return "second signal: killed the running servers"
	case n == 1:
		return "stopping"
	}
	return "second signal: one more ends bmx at once"
}
