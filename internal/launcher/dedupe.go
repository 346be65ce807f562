package launcher

import (
	"slices"
	"sync"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// twins keeps, for a sweep with Dedupe, the cells that "auto" cells resolved
// to (matrix.Config.Twin) with the result they inherit when their turn
// comes: the auto cell's. A twin that already started runs as usual.
type twins struct {
	cfg   *matrix.Config
	cells cellList
	mu    sync.Mutex
	of    map[string]record.Result // twin ID -> the auto cell's result
}

func newTwins(cfg *matrix.Config, cells cellList) *twins {
	return &twins{cfg: cfg, cells: cells, of: map[string]record.Result{}}
}

// add records the twin of an auto cell's result, if it has one.
func (t *twins) add(r record.Result) {
	if t == nil || r.InheritedFrom != "" || len(r.Resolved) == 0 {
		return
	}
	twin, ok := t.cfg.TwinAmong(r.Cell, r.Resolved, t.cells.lookup)
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
	return autoFirst(listOf(cells), reference).built()
}

// autoFirst is AutoFirst of a list of cells held as keys; it holds the
// values of the auto cells alone.
func autoFirst(cells cellList, reference string) cellList {
	ref := -1
	if reference != "" {
		ref = cells.index(reference)
	}
	var autos []int                     // positions of the auto cells
	var autoValues [][]matrix.AxisValue // their values
	var buf []matrix.AxisValue
	for i := range cells.len() {
		buf = cells.values(buf[:0], i)
		if i != ref && (matrix.Cell{Values: buf}).HasAuto() {
			autos = append(autos, i)
			autoValues = append(autoValues, slices.Clone(buf))
		}
	}
	if len(autos) == 0 {
		return cells
	}
	out := make([]int, 0, cells.len())
	placed := make([]bool, cells.len())
	for i := range cells.len() {
		if placed[i] {
			continue
		}
		buf = cells.values(buf[:0], i)
		if i != ref && !(matrix.Cell{Values: buf}).HasAuto() {
			for j, a := range autos {
				if !placed[a] && couldBe(autoValues[j], buf) {
					out = append(out, a)
					placed[a] = true
				}
			}
		}
		out = append(out, i)
		placed[i] = true
	}
	return cells.pick(out)
}

// couldBe reports whether auto cell a could resolve to cell c: they agree on
// every axis on which a is not auto.
func couldBe(a, c []matrix.AxisValue) bool {
	if len(a) != len(c) {
		return false
	}
	return !slices.ContainsFunc(a, func(av matrix.AxisValue) bool {
		v, ok := matrix.Cell{Values: c}.Value(av.Axis)
		return !ok || av.Value != matrix.AutoValue && v != av.Value
	})
}
