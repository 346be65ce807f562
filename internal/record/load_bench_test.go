package record

import (
	"fmt"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// BenchmarkNewReport orders the results of n cells, recorded in reverse and
// each twice (a resumed run): a map and a sort, so ns/op grows about 10x
// (n log n) from 1,000 to 10,000 cells, never 100x (the quadratic ordering
// issue 15 removed).
func BenchmarkNewReport(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		run := &Run{Axes: []AxisValues{{Name: "a"}}}
		var results []Result
		for i := range n {
			run.Axes[0].Values = append(run.Axes[0].Values, fmt.Sprint(i))
		}
		for range 2 {
			for i := n - 1; i >= 0; i-- {
				v := fmt.Sprint(i)
				results = append(results, Result{Cell: matrix.Cell{ID: "a=" + v, Values: []matrix.AxisValue{{Axis: "a", Value: v}}}})
			}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				if got := NewReport(run, results).Results; len(got) != n || got[0].Cell.ID != "a=0" {
					b.Fatal("wrong order")
				}
			}
		})
	}
}
