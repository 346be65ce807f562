package launcher

import (
	"slices"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// OrderCells returns cells in the order a sweep starts them. Under
// matrix.OrderFile that is the plan's order. Under matrix.OrderInformative
// it is the reference cell first, then a greedy cover: each next cell is the
// one that adds the most axis values not yet seen (in done, the cells a
// resumed run finished, or in the cells picked before it), cells that known
// issues and the baseline run say are likely to work before the others; the
// remaining cells after, likely-working first. Ties keep the plan's order,
// so the order is a function of its inputs alone: a resume or a shard gets
// the same order for the same cells, and which cells a shard holds does not
// depend on it. blamed are the values the baseline's failures are blamed on.
func OrderCells(cfg *matrix.Config, cells []matrix.Cell, reference string, done []record.Result, baseline *record.Report, blamed []matrix.AxisValue) []matrix.Cell {
	if cfg.Order == matrix.OrderFile || len(cells) < 2 {
		return cells
	}
	return orderList(cfg, listOf(cells), reference, done, baseline, blamed).built()
}

// orderList is OrderCells of a list of cells held as keys: their values are
// read one cell at a time, and no cell is built.
func orderList(cfg *matrix.Config, cells cellList, reference string, done []record.Result, baseline *record.Report, blamed []matrix.AxisValue) cellList {
	if cfg.Order == matrix.OrderFile || cells.len() < 2 {
		return cells
	}
	score := likelihood(cfg, cells, baseline, blamed)
	covered := map[matrix.AxisValue]bool{}
	for _, r := range done {
		if r.Verdict != classify.Predicted && r.Verdict != classify.Skipped {
			for _, av := range r.Cell.Values {
				covered[av] = true
			}
		}
	}
	var buf []matrix.AxisValue
	cover := func(i int) {
		buf = cells.values(buf[:0], i)
		for _, av := range buf {
			covered[av] = true
		}
	}
	out := make([]int, 0, cells.len())  // positions in cells, in the order
	left := make([]int, 0, cells.len()) // positions in cells, in plan order
	for i := range cells.len() {
		if reference != "" && cells.id(i) == reference {
			out = append(out, i)
			cover(i)
			continue
		}
		left = append(left, i)
	}
	gain := func(i int) int {
		n := 0
		buf = cells.values(buf[:0], i)
		for _, av := range buf {
			if !covered[av] {
				n++
			}
		}
		return n
	}
	// better orders two candidates: likely to work, then more new values,
	// then a higher score; equal ones keep the plan's order.
	better := func(i, j, gi, gj int) bool {
		if li, lj := score[i] >= 0, score[j] >= 0; li != lj {
			return li
		}
		if gi != gj {
			return gi > gj
		}
		return score[i] > score[j]
	}
	for len(left) > 0 {
		best, bestGain := -1, 0
		for k, i := range left {
			g := gain(i)
			if g == 0 {
				continue
			}
			if best < 0 || better(i, left[best], g, bestGain) {
				best, bestGain = k, g
			}
		}
		if best < 0 {
			break // every value is covered
		}
		out = append(out, left[best])
		cover(left[best])
		left = slices.Delete(left, best, best+1)
	}
	slices.SortStableFunc(left, func(i, j int) int { return score[j] - score[i] })
	return cells.pick(append(out, left...))
}

// likelihood scores how likely each cell is to work (by index in cells):
// negative means expected to fail. A known issue that matches the cell
// counts against it; in the baseline run, the cell's own verdict counts
// most, and each of its values in blamed (those the baseline's blame table
// blames) counts against it.
func likelihood(cfg *matrix.Config, cells cellList, baseline *record.Report, blamedValues []matrix.AxisValue) []int {
	score := make([]int, cells.len())
	var before map[string]classify.Verdict
	blamed := map[matrix.AxisValue]bool{}
	if baseline != nil {
		before = map[string]classify.Verdict{}
		for _, r := range baseline.Results {
			before[r.Cell.ID] = r.Verdict
		}
		for _, av := range blamedValues {
			blamed[av] = true
		}
	}
	var values []matrix.AxisValue
	for i := range score {
		values = cells.values(values[:0], i)
		for _, k := range cfg.Known {
			if k.Matches(matrix.Cell{Values: values}) {
				score[i] -= 3
			}
		}
		if before != nil {
			switch v := before[cells.id(i)]; v {
			case classify.Correct:
				score[i] += 6
			case classify.Degraded, classify.Flaky:
				score[i] += 2
			case "", classify.Inconclusive, classify.Skipped, classify.Excluded, classify.Predicted:
			default:
				score[i] -= 6
			}
		}
		for _, av := range values {
			if blamed[av] {
				score[i] -= 2
			}
		}
	}
	return score
}
