package launcher

import (
	"fmt"
	"testing"

	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/reports"
)

// BenchmarkInPlanOrder orders the results of n cells: linear in cells, so
// ns/op grows 10x from 1,000 to 10,000 cells (it grew 100x when quadratic).
func BenchmarkInPlanOrder(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		cells := make([]matrix.Cell, n)
		results := make([]reports.Result, n)
		for i := range n {
			cells[i] = matrix.Cell{ID: fmt.Sprintf("a=%d", i)}
			results[n-1-i] = reports.Result{Cell: cells[i]}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				if got := inPlanOrder(cells, results); len(got) != n || got[0].Cell.ID != "a=0" {
					b.Fatal("wrong order")
				}
			}
		})
	}
}
