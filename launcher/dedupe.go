package launcher

import (
	"slices"
	"sync"

	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/record"
)

// twins keeps, for a sweep with Dedupe, the cells that "auto" cells resolved
// to (matrix.Config.Twin) with the result they inherit when their turn
// comes: the auto cell's. A twin that already started runs as usual.
type twins struct {
	cfg   *matrix.Config
	cells []matrix.Cell
	mu    sync.Mutex
	of    map[string]record.Result // twin ID -> the auto cell's result
}

func newTwins(cfg *matrix.Config, cells []matrix.Cell) *twins {
	return &twins{cfg: cfg, cells: cells, of: map[string]record.Result{}}
}

// add records the twin of an auto cell's result, if it has one.
func (t *twins) add(r record.Result) {
	if t == nil || r.InheritedFrom != "" || len(r.Resolved) == 0 {
		return
	}
	twin, ok := t.cfg.Twin(r.Cell, r.Resolved, t.cells)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, done := t.of[twin.ID]; !done {
		t.of[twin.ID] = r
	}
}

// source is the result cell inherits, if an auto cell resolved to it.
func (t *twins) source(cell matrix.Cell) (record.Result, bool) {
	if t == nil {
		return record.Result{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.of[cell.ID]
	return r, ok
}

// AutoFirst moves each cell with an "auto" value just before the first cell
// it could turn out to be (equal on every axis where it is not auto), so that
// with dedupe the auto cell runs first and its twin need not. The reference
// stays first; the order is otherwise kept.
func AutoFirst(cells []matrix.Cell, reference string) []matrix.Cell {
	out := make([]matrix.Cell, 0, len(cells))
	placed := make(map[string]bool, len(cells))
	var autos []matrix.Cell
	for _, c := range cells {
		if c.HasAuto() && c.ID != reference {
			autos = append(autos, c)
		}
	}
	for _, c := range cells {
		if placed[c.ID] {
			continue
		}
		if c.ID != reference && !c.HasAuto() {
			for _, a := range autos {
				if !placed[a.ID] && couldBe(a, c) {
					out = append(out, a)
					placed[a.ID] = true
				}
			}
		}
		out = append(out, c)
		placed[c.ID] = true
	}
	return out
}

// couldBe reports whether auto cell a could resolve to cell c: they agree on
// every axis on which a is not auto.
func couldBe(a, c matrix.Cell) bool {
	if len(a.Values) != len(c.Values) {
		return false
	}
	return !slices.ContainsFunc(a.Values, func(av matrix.AxisValue) bool {
		v, ok := c.Value(av.Axis)
		return !ok || av.Value != matrix.AutoValue && v != av.Value
	})
}
