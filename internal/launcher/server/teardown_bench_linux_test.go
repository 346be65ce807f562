//go:build linux

package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
)

// BenchmarkTeardown: one server's teardown, stage by stage, for a server
// that listens and exits at once on SIGTERM (the test binary's "listen"
// mode): the supervisor's part (SIGTERM, the exit, the tree's end and its
// report), the port wait, and the whole teardown; "marker" is what a
// marker sweep costs, which the teardown skips when the supervisor held the
// whole tree. Run it
// with
//
//	go test -run '^$' -bench Teardown -benchtime 20x ./internal/launcher/server
//
// The figures are medians and minimums over the iterations, in ms; the
// host's load (uptime) belongs next to them.
func BenchmarkTeardown(b *testing.B) {
	self, _ := os.Executable()
	dir := b.TempDir()
	var stop, marked, port, total []float64
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for i := range b.N {
		log, err := os.Create(filepath.Join(dir, strconv.Itoa(i)+".log"))
		if err != nil {
			b.Fatal(err)
		}
		p, err := freePort("127.0.0.1")
		if err != nil {
			b.Fatal(err)
		}
		marker := CellMarker(RunMarker(dir), "a=x", i)
		srv, err := Start(Spec{
			Argv: []string{self}, Env: []string{"BMX_LAUNCHER_HELPER=listen", "PORT=" + strconv.Itoa(p), MarkerEnv + "=" + marker},
			Marker: marker, Log: log, Host: "127.0.0.1", Port: p, IsFatal: classify.IsFatal,
		})
		if err != nil {
			b.Fatal(err)
		}
		if r := srv.WaitReady(context.Background(), Readiness{Health: "/health", Timeout: time.Minute}); !r.Ready {
			b.Fatalf("not ready: %+v", r)
		}
		t0 := time.Now()
		srv.proc.stop(5 * time.Second)
		t1 := time.Now()
		if !srv.proc.heldWhole() {
			KillMarked(marker)
		}
		t2 := time.Now()
		if err := waitPortFree("127.0.0.1", p, portFreeWait); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		srv.watch.stop()
		t4 := time.Now()
		// What the marker sweep would cost, for comparison: it is skipped
		// when the supervisor held the whole tree.
		KillMarked(marker)
		t5 := time.Now()
		stop, marked, port, total = append(stop, ms(t1.Sub(t0))), append(marked, ms(t5.Sub(t4))), append(port, ms(t3.Sub(t2))), append(total, ms(t4.Sub(t0)))
		log.Close()
	}
	for _, m := range []struct {
		name string
		v    []float64
	}{{"stop", stop}, {"marker", marked}, {"port", port}, {"teardown", total}} {
		slices.Sort(m.v)
		b.ReportMetric(m.v[0], "ms-"+m.name+"-min")
		b.ReportMetric(m.v[len(m.v)/2], "ms-"+m.name+"-median")
	}
}
