package main

import "syscall"

// addressSpaceLimit is the soft limit on the process's virtual memory
// (ulimit -v), in bytes; ok is false when there is none.
func addressSpaceLimit() (bytes uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil || lim.Cur == ^uint64(0) {
		return 0, false
	}
	return lim.Cur, true
}
