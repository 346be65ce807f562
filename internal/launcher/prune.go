package launcher

import (
	"cmp"
	"maps"
	"slices"
	"sync"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// pruner predicts cells --prune does not start: a cell is predicted when
// one of its axis values has failed with one cause (verdict and signature)
// in at least k finished cells that differ from each other in every other
// axis. Only failures that name the backend count (crash, hang, nan,
// garbage, wrong): never correct, degraded, flaky or inconclusive, and never
// another prediction, so a prediction always rests on cells that ran.
type pruner struct {
	k    int
	axes []string
	mu   sync.Mutex
	// failed holds, per axis value and cause, the failed cells with it.
	failed map[matrix.AxisValue]map[cause][]matrix.Cell
}

type cause struct {
	verdict   classify.Verdict
	signature string
}

// predictable are the verdicts a prediction may rest on.
var predictable = []classify.Verdict{classify.Crash, classify.Hang, classify.NaN, classify.Garbage, classify.Wrong}

func newPruner(k int, cfg *matrix.Config) *pruner {
	p := &pruner{k: k, failed: map[matrix.AxisValue]map[cause][]matrix.Cell{}}
	for _, a := range cfg.Axes {
		p.axes = append(p.axes, a.Name)
	}
	return p
}

// add takes a finished cell's result as evidence; a nil pruner (pruning
// off) takes nothing.
func (p *pruner) add(r record.Result) {
	if p == nil || !slices.Contains(predictable, r.Verdict) || r.Prediction != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := cause{r.Verdict, r.Signature}
	for _, av := range r.Cell.Values {
		if p.failed[av] == nil {
			p.failed[av] = map[cause][]matrix.Cell{}
		}
		p.failed[av][c] = append(p.failed[av][c], r.Cell)
	}
}

// predict returns why cell need not start, or nil when it must (always,
// for a nil pruner).
func (p *pruner) predict(cell matrix.Cell) *record.Prediction {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, av := range cell.Values {
		byCause := p.failed[av]
		for _, c := range slices.SortedFunc(maps.Keys(byCause), func(a, b cause) int {
			if n := len(byCause[b]) - len(byCause[a]); n != 0 {
				return n
			}
			if a.verdict != b.verdict {
				return classify.Verdict.Severity(b.verdict) - classify.Verdict.Severity(a.verdict)
			}
			return cmp.Compare(a.signature, b.signature)
		}) {
			if set := p.apart(av.Axis, byCause[c]); len(set) >= p.k {
				ids := make([]string, len(set))
				for i, s := range set {
					ids[i] = s.ID
				}
				return &record.Prediction{Axis: av.Axis, Value: av.Value, Verdict: c.verdict, Signature: c.signature, Cells: ids}
			}
		}
	}
	return nil
}

// apart picks, greedily in ID order, cells that differ from each other in
// every axis but axis (a cell without a value on such an axis differs from
// none).
func (p *pruner) apart(axis string, cells []matrix.Cell) []matrix.Cell {
	sorted := slices.SortedFunc(slices.Values(cells), func(a, b matrix.Cell) int { return cmp.Compare(a.ID, b.ID) })
	var set []matrix.Cell
	for _, c := range sorted {
		if !slices.ContainsFunc(set, func(s matrix.Cell) bool { return !p.differ(axis, c, s) }) {
			set = append(set, c)
		}
	}
	return set
}

func (p *pruner) differ(axis string, a, b matrix.Cell) bool {
	for _, name := range p.axes {
		if name == axis {
			continue
		}
		va, okA := a.Value(name)
		vb, okB := b.Value(name)
		if !okA || !okB || va == vb {
			return false
		}
	}
	return true
}
