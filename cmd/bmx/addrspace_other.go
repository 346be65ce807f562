//go:build !linux

package main

// addressSpaceLimit says there is none: ulimit -v is enforced on Linux.
func addressSpaceLimit() (bytes uint64, ok bool) { return 0, false }
