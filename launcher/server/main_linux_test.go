//go:build linux

package server

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the processes the tests start: with
// BMX_LAUNCHER_HELPER set it runs that mode instead of the tests; as bmx
// does, it is also each server's supervisor (/proc/self/exe re-executed
// with SuperviseArg).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SuperviseArg {
		os.Exit(Supervise(os.Args[2:]))
	}
	if mode := os.Getenv("BMX_LAUNCHER_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	switch mode {
	case "stuck-ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "Capture cuda graph begin. This can take up to several minutes.")
		time.Sleep(time.Hour)
	}
	return 2
}
