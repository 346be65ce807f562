package launcher

import (
	"iter"
	"slices"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// LoadMatrix reads a matrix file (the built-in simulated host for path ""),
// expands it (refusing more than maxCells cells, 0 for
// matrix.DefaultMaxCells, before building any) and keeps the cells that
// only names. Warnings that do not stop a sweep are in the plan's Warnings.
func LoadMatrix(path string, vars map[string]string, only []string, maxCells int) (*matrix.Config, *matrix.Plan, error) {
	cfg, stream, err := loadStream(path, vars, only, maxCells)
	if err != nil {
		return nil, nil, err
	}
	return cfg, stream.Plan(), nil
}

// loadStream is LoadMatrix without building any cell.
func loadStream(path string, vars map[string]string, only []string, maxCells int) (*matrix.Config, *matrix.Stream, error) {
	cfg, err := matrix.Load(path, vars)
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxCells = maxCells
	// The stream applies only before any cell is built: the cells only
	// leaves out are never held.
	stream, err := cfg.Stream(only)
	if err != nil {
		return nil, nil, err
	}
	return cfg, stream, nil
}

// cellList is the cells a sweep runs, in order, held as keys of a source
// that builds each cell when asked. A session's source is the matrix's
// Stream: a cell with its argv and environment is about 2 KB, a key 8
// bytes, so a sweep of a million cells holds 8 MB for the cells not yet run
// and builds each one only as it starts. The order, the resume, the shard,
// pruning and dedupe look at a cell's values and ID, which the source gives
// without building it.
type cellList struct {
	src  cellSource
	keys []int
}

// cellSource builds the cells its keys name; *matrix.Stream is one.
type cellSource interface {
	// Cell builds the cell of key k.
	Cell(k int) matrix.Cell
	// AppendValues appends the cell's values to buf, without building it.
	AppendValues(buf []matrix.AxisValue, k int) []matrix.AxisValue
	// ID is the cell's ID, without building it.
	ID(k int) string
	// Lookup is the keys of the cells with these values, in key order.
	Lookup(values []matrix.AxisValue) []int
}

// sliceCells is a source of cells already built: key i is cells[i]. The
// exported functions that take a []matrix.Cell run on it.
type sliceCells []matrix.Cell

func (s sliceCells) Cell(k int) matrix.Cell { return s[k] }
func (s sliceCells) ID(k int) string        { return s[k].ID }

func (s sliceCells) AppendValues(buf []matrix.AxisValue, k int) []matrix.AxisValue {
	return append(buf, s[k].Values...)
}

func (s sliceCells) Lookup(values []matrix.AxisValue) []int {
	var keys []int
	for i, c := range s {
		if slices.Equal(c.Values, values) {
			keys = append(keys, i)
		}
	}
	return keys
}

// listOf is the list of cells, in their order.
func listOf(cells []matrix.Cell) cellList {
	keys := make([]int, len(cells))
	for i := range keys {
		keys[i] = i
	}
	return cellList{src: sliceCells(cells), keys: keys}
}

func (l cellList) len() int { return len(l.keys) }

// cell builds the i-th cell.
func (l cellList) cell(i int) matrix.Cell { return l.src.Cell(l.keys[i]) }

// values appends the i-th cell's values to buf.
func (l cellList) values(buf []matrix.AxisValue, i int) []matrix.AxisValue {
	return l.src.AppendValues(buf, l.keys[i])
}

func (l cellList) id(i int) string { return l.src.ID(l.keys[i]) }

// index is the position of the cell whose ID is id, or -1.
func (l cellList) index(id string) int {
	for i := range l.keys {
		if l.id(i) == id {
			return i
		}
	}
	return -1
}

// pick is the list of the cells at these positions, in this order.
func (l cellList) pick(at []int) cellList {
	keys := make([]int, len(at))
	for j, i := range at {
		keys[j] = l.keys[i]
	}
	return cellList{src: l.src, keys: keys}
}

// keep is the list of the cells keep says yes to, in order.
func (l cellList) keep(keep func(i int) bool) cellList {
	var keys []int
	for i, k := range l.keys {
		if keep(i) {
			keys = append(keys, k)
		}
	}
	return cellList{src: l.src, keys: keys}
}

// All yields the cells in order, each built as it is yielded (a
// matrix.Cells, for the help check).
func (l cellList) All() iter.Seq[matrix.Cell] {
	return func(yield func(matrix.Cell) bool) {
		for i := range l.keys {
			if !yield(l.cell(i)) {
				return
			}
		}
	}
}

// built is every cell of the list, built.
func (l cellList) built() []matrix.Cell {
	out := make([]matrix.Cell, len(l.keys))
	for i := range l.keys {
		out[i] = l.cell(i)
	}
	return out
}

// lookup is the cells with these values, built.
func (l cellList) lookup(values []matrix.AxisValue) []matrix.Cell {
	var out []matrix.Cell
	for _, k := range l.src.Lookup(values) {
		out = append(out, l.src.Cell(k))
	}
	return out
}

// keepShard keeps the cells of shard sh, as matrix.Plan.KeepShard keeps
// them, and returns how the cells were dealt: the deal reads each cell's ID
// and values, and builds none.
func keepShard(cells cellList, reference string, sh matrix.Shard) (cellList, matrix.Assignment) {
	light := make([]matrix.Cell, cells.len())
	for i := range light {
		light[i] = matrix.Cell{ID: cells.id(i), Values: cells.values(nil, i)}
	}
	a := matrix.Assign(light, reference, sh.Count)
	runsRef := a.RunsReference(sh.Index)
	return cells.keep(func(i int) bool {
		id := light[i].ID
		if id == a.Reference && a.Reference != "" {
			return runsRef
		}
		s, ok := a.Of[id]
		return ok && s == sh.Index
	}), a
}
