//go:build linux

package server

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
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
	case "fatal-then-linger":
		// SGLang's scheduler death: the fatal line, the traceback, then a
		// long wait for diagnostics before it kills itself.
		fmt.Fprintln(os.Stderr, "[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):")
		fmt.Fprintln(os.Stderr, "  File \"scheduler.py\", line 1, in run_scheduler_process")
		fmt.Fprintln(os.Stderr, "RuntimeError: CUTLASS grouped GEMM failed: Error Internal")
		time.Sleep(time.Minute)
	case "listen":
		// Answers /health on PORT; SIGTERM ends it at once.
		http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
		fmt.Fprintln(os.Stderr, http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil))
		return 1
	case "warming":
		// Binds PORT at once, answers /health 503 for its first WARM, then
		// 200; writes each poll's number to its log.
		warm, _ := time.ParseDuration(os.Getenv("WARM"))
		var polls atomic.Int32
		t0 := time.Now()
		http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(os.Stderr, "HEALTH", polls.Add(1))
			if time.Since(t0) < warm {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		fmt.Fprintln(os.Stderr, http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil))
		return 1
	case "drain":
		// Answers /health on PORT; on SIGTERM it counts its open
		// connections for up to a second, says how many were still open,
		// and exits.
		var open atomic.Int32
		srv := &http.Server{Addr: "127.0.0.1:" + os.Getenv("PORT"), ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}}
		http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		go func() { fmt.Fprintln(os.Stderr, srv.ListenAndServe()) }()
		<-sigs
		for deadline := time.Now().Add(time.Second); open.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, "OPEN AFTER SIGTERM", open.Load())
		return 0
	case "stuck-ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "Capture cuda graph begin. This can take up to several minutes.")
		time.Sleep(time.Hour)
	}
	return 2
}
