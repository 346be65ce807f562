// Package benchmem measures what a benchmark holds: the largest heap seen
// while it runs, and how much it writes. Benchmarks only.
package benchmem

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// HeapPeak runs f b.N times and returns the largest heap (live and not yet
// collected objects, MiB) seen while it ran, sampled every 2 ms.
func HeapPeak(b *testing.B, f func()) float64 {
	b.Helper()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	b.ResetTimer()
	for range b.N {
		f()
	}
	b.StopTimer()
	close(done)
	wg.Wait()
	return float64(peak.Load()) / (1 << 20)
}

// CountWriter counts what is written and keeps none of it.
type CountWriter struct{ N int64 }

func (w *CountWriter) Write(p []byte) (int, error) {
	w.N += int64(len(p))
	return len(p), nil
}
