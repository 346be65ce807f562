package server

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// OnSignals returns a context that the first SIGINT or SIGTERM cancels: a
// sweep stops starting cells, tears down the running servers (SIGTERM, their
// grace, SIGKILL) and returns. A second signal SIGKILLs every running server
// at once, so the sweep unwinds without waiting out any grace; after it,
// signals get their default action again, so a third one ends bmx even if
// something hangs. told, if set, hears of each of the two signals (n is 1 or
// 2). stop releases the signals and ends the goroutine that watches them;
// nothing here exits the process.
func OnSignals(parent context.Context, told func(sig os.Signal, n int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 1; n <= 2; n++ {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case <-done:
				return
			}
			if n == 1 {
				cancel()
			} else {
				signal.Stop(sigs)
				KillAll() // no server may outlive bmx, nor keep it waiting
			}
			if told != nil {
				told(sig, n)
			}
		}
	})
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel()
	}
}
