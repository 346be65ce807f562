//go:build linux

package launcher

import (
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// BenchmarkOrderAndPrune gives issue 17's figures: server starts and wall
// time to the full map with and without --prune, and time to the first
// correct cell under file and informative order, on the default simulated
// SM120 matrix and on the 4-axis matrix, with a 1 s model load (a crash
// comes 30% into it) against probes of tens of milliseconds: the ratio of a
// real host's minutes of load to seconds of probes, scaled down. Ratios are
// against the full grid in file order. Run it with
// go test ./internal/launcher -run '^$' -bench OrderAndPrune -benchtime 1x.
func BenchmarkOrderAndPrune(b *testing.B) {
	for _, m := range []struct{ name, config string }{
		{"sim-sm120", writeSimSM120(b, "1s", "")},
		{"four-axis", writeFourAxis(b, "1s")},
	} {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				base := sweepWith(b, m.config, matrix.OrderFile, false, "", false)
				b.Logf("%-28s starts %2d (%.2fx) wall %6.1fs (%.2fx) first correct %5.1fs (%.2fx) after %d starts",
					"file, full grid", base.starts, 1.0, base.wall.Seconds(), 1.0, base.firstCorrect.Seconds(), 1.0, base.firstAfter)
				for _, v := range []struct {
					order string
					prune bool
				}{{matrix.OrderInformative, false}, {matrix.OrderFile, true}, {matrix.OrderInformative, true}} {
					f := sweepWith(b, m.config, v.order, v.prune, "", false)
					name := v.order
					if v.prune {
						name += " --prune"
					}
					b.Logf("%-28s starts %2d (%.2fx) wall %6.1fs (%.2fx) first correct %5.1fs (%.2fx) after %d starts",
						name, f.starts, float64(f.starts)/float64(base.starts), f.wall.Seconds(), f.wall.Seconds()/base.wall.Seconds(),
						f.firstCorrect.Seconds(), f.firstCorrect.Seconds()/base.firstCorrect.Seconds(), f.firstAfter)
				}
			}
		})
	}
}
