package matrix

import (
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Cells are a plan's cells: held (a Plan) or built as they are asked for (a
// Stream).
type Cells interface {
	All() iter.Seq[Cell]
}

// All yields the plan's cells in order.
func (p *Plan) All() iter.Seq[Cell] { return slices.Values(p.Cells) }

// Stream is a config expanded into cells that are built one at a time, when
// asked for: a Cell with its argv and environment is about 2 KB, so a plan
// of a million cells held whole would take gigabytes, where a Stream holds
// the counts, the warnings, the reference cell and the cells that includes
// add (as many as there are includes). Its cells are exactly Expand's, in
// the same order, with --only applied as Plan.Filter applies it.
type Stream struct {
	// Reference is the ID of the reference cell ("" = none); All yields it
	// first.
	Reference string
	// Warnings are problems that do not stop a sweep, as Plan's.
	Warnings []string

	cfg      *Config
	only     onlyWant
	n        int    // cells All yields
	excluded int    // combinations an exclude removes
	added    []Cell // cells of includes that extend no combination
	ref      *Cell  // the reference cell, nil when there is none
	refKept  int    // its position among the kept combinations, or -1
	refAdded int    // its index in added, or -1
	refPos   int    // its position among all combinations, or -1
	// shownOf are each axis's values as a cell shows them, for Keys.
	shownOf [][]string
}

// Stream expands the config as Expand does, keeping the cells that only
// names as Plan.Filter does, without building any cell: it counts them,
// checks the includes and the reference, and leaves the building to All.
func (c *Config) Stream(only []string) (*Stream, error) {
	if err := c.checkSize(); err != nil {
		return nil, err
	}
	want, onlyErr := c.parseOnly(only)
	s := &Stream{cfg: c, only: want, refKept: -1, refAdded: -1, refPos: -1, shownOf: c.shownValues()}
	excludeHits := make([]int, len(c.Exclude))
	extends := make([]bool, len(c.Include)) // include i extends a kept combination
	var refCombo []AxisValue
	kept, refHits, matched, refOK, pos := 0, 0, 0, true, -1
	c.combos(func(combo, shown []AxisValue) bool {
		pos++
		excluded := false
		for i, ex := range c.Exclude {
			if matches(combo, ex) {
				excludeHits[i]++
				excluded = true
			}
		}
		if excluded {
			s.excluded++
			return true
		}
		for i, inc := range c.Include {
			if !extends[i] && matches(combo, inc.Values) {
				extends[i] = true
			}
		}
		ok := want.keeps(shown)
		if ok {
			matched++
		}
		if len(c.Reference) > 0 && matches(shown, c.Reference) {
			refHits++
			s.refKept, s.refPos, refCombo, refOK = kept, pos, slices.Clone(combo), ok
		}
		kept++
		return true
	})
	for i, n := range excludeHits {
		if n == 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: exclude #%d %s matches no cell", c.Path, i+1, formatPairs(c.Exclude[i])))
		}
	}
	if err := s.addIncludes(extends); err != nil {
		return nil, err
	}
	if kept+len(s.added) == 0 {
		return nil, fmt.Errorf("%w: %s: the excludes remove every cell the axes span (%d): nothing would run", ErrInvalid, c.where(), s.excluded)
	}
	for j, cell := range s.added {
		ok := want.keeps(cell.Values)
		if ok {
			matched++
		}
		if len(c.Reference) > 0 && matches(cell.Values, c.Reference) {
			refHits++
			s.refKept, s.refPos, s.refAdded, refOK = -1, -1, j, ok
		}
	}
	if err := s.reference(refHits, refCombo); err != nil {
		return nil, err
	}
	if onlyErr != nil {
		return nil, onlyErr
	}
	s.n = kept + len(s.added)
	if len(want) > 0 {
		if matched == 0 {
			return nil, fmt.Errorf("%w: --only %s matches no cell", ErrInvalid, strings.Join(only, " "))
		}
		s.n = matched
		if s.ref != nil && !refOK {
			s.n++
			s.Warnings = append(s.Warnings, fmt.Sprintf("the reference cell %s is not among the --only cells: it runs as well, since the others are judged against it", s.Reference))
		}
	}
	return s, nil
}

// addIncludes makes a cell of each include that extends no kept
// combination, in order; one whose ID is already a cell's is an error.
func (s *Stream) addIncludes(extends []bool) error {
	c := s.cfg
	ids := map[string]bool{}
	var incs []Include // the include of each added cell
	for i, inc := range c.Include {
		if extends[i] {
			continue
		}
		var combo []AxisValue
		for _, a := range c.Axes {
			if v, ok := inc.Values[a.Name]; ok {
				combo = append(combo, AxisValue{Axis: a.Name, Value: v})
			}
		}
		cell := c.cell(combo, nil, []Include{inc})
		ids[cell.ID] = true
		s.added, incs = append(s.added, cell), append(incs, inc)
	}
	if len(s.added) == 0 {
		return nil
	}
	// Only the IDs an added cell has are looked for among the kept
	// cells: a set of every kept ID would be the plan's size again.
	seen := map[string]bool{}
	c.combos(func(combo, shown []AxisValue) bool {
		if c.excludedCombo(combo) {
			return true
		}
		if id := joinID(shown); ids[id] {
			seen[id] = true
		}
		return true
	})
	for i, cell := range s.added {
		if seen[cell.ID] {
			return fmt.Errorf("%w: %s: include %s adds cell %s twice", ErrInvalid, c.Path, formatPairs(incs[i].Values), cell.ID)
		}
		seen[cell.ID] = true
	}
	return nil
}

// reference checks that the reference matches exactly one cell and builds
// that cell.
func (s *Stream) reference(hits int, refCombo []AxisValue) error {
	c := s.cfg
	if len(c.Reference) == 0 {
		return nil
	}
	if hits != 1 {
		return fmt.Errorf("%w: %s: reference %s matches %d cells: it must name exactly one", ErrInvalid, c.Path, formatPairs(c.Reference), hits)
	}
	if s.refAdded >= 0 {
		s.ref = &s.added[s.refAdded]
	} else {
		ref := c.cell(refCombo, nil, c.includesOf(refCombo))
		s.ref = &ref
	}
	s.Reference = s.ref.ID
	return nil
}

// Len is the number of cells All yields.
func (s *Stream) Len() int { return s.n }

// ExcludedLen is the number of combinations the excludes remove.
func (s *Stream) ExcludedLen() int { return s.excluded }

// All yields the plan's cells in Expand's order: the reference first, the
// kept combinations in product order, each extended by the includes that
// match it, then the cells includes add. Each cell is built as it is
// yielded and belongs to the caller.
func (s *Stream) All() iter.Seq[Cell] {
	return func(yield func(Cell) bool) {
		c := s.cfg
		if s.ref != nil && !yield(*s.ref) {
			return
		}
		kept, stopped := 0, false
		c.combos(func(combo, shown []AxisValue) bool {
			if c.excludedCombo(combo) {
				return true
			}
			i := kept
			kept++
			if i == s.refKept || !s.only.keeps(shown) {
				return true
			}
			stopped = !yield(c.cell(combo, shown, c.includesOf(combo)))
			return !stopped
		})
		if stopped {
			return
		}
		for j, cell := range s.added {
			if j == s.refAdded || !s.only.keeps(cell.Values) {
				continue
			}
			if !yield(cell) {
				return
			}
		}
	}
}

// Excluded yields the combinations the excludes remove, in product order,
// as cells without includes (--only does not apply to them).
func (s *Stream) Excluded() iter.Seq[Cell] {
	return func(yield func(Cell) bool) {
		c := s.cfg
		c.combos(func(combo, shown []AxisValue) bool {
			if !c.excludedCombo(combo) {
				return true
			}
			return yield(c.cell(combo, shown, nil))
		})
	}
}

// Plan builds every cell: the Plan that Expand and then Filter give.
func (s *Stream) Plan() *Plan {
	p := &Plan{Reference: s.Reference, Warnings: s.Warnings}
	if s.n > 0 {
		p.Cells = slices.AppendSeq(make([]Cell, 0, s.n), s.All())
	}
	if s.excluded > 0 {
		p.Excluded = slices.AppendSeq(make([]Cell, 0, s.excluded), s.Excluded())
	}
	return p
}

// combos calls f with every combination of the axes' values, the first axis
// varying slowest, until f returns false. combo holds the values as
// written, shown the values as a cell shows them (a secret masked); both
// are reused between calls, so f copies what it keeps.
func (c *Config) combos(f func(combo, shown []AxisValue) bool) {
	for _, a := range c.Axes {
		if len(a.Values) == 0 {
			return
		}
	}
	shownOf := c.shownValues()
	idx := make([]int, len(c.Axes))
	combo := make([]AxisValue, len(c.Axes))
	shown := make([]AxisValue, len(c.Axes))
	set := func(i int) {
		a := &c.Axes[i]
		combo[i] = AxisValue{Axis: a.Name, Value: a.Values[idx[i]].Name}
		shown[i] = AxisValue{Axis: a.Name, Value: shownOf[i][idx[i]]}
	}
	for i := range c.Axes {
		set(i)
	}
	for f(combo, shown) {
		i := len(idx) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(c.Axes[i].Values) {
				set(i)
				break
			}
			idx[i] = 0
			set(i)
		}
		if i < 0 {
			return
		}
	}
}

// shownValues are each axis's values as a cell shows them (a secret
// masked), by axis and value index.
func (c *Config) shownValues() [][]string {
	shownOf := make([][]string, len(c.Axes))
	for i, a := range c.Axes {
		shownOf[i] = make([]string, len(a.Values))
		for j, v := range a.Values {
			shownOf[i][j] = a.Shown(v.Name)
		}
	}
	return shownOf
}

// excludedCombo reports whether an exclude removes combo.
func (c *Config) excludedCombo(combo []AxisValue) bool {
	for _, ex := range c.Exclude {
		if matches(combo, ex) {
			return true
		}
	}
	return false
}

// includesOf are the includes that extend combo, in order.
func (c *Config) includesOf(combo []AxisValue) []Include {
	var out []Include
	for _, inc := range c.Include {
		if matches(combo, inc.Values) {
			out = append(out, inc)
		}
	}
	return out
}

// joinID is the ID of a cell of these (shown) values.
func joinID(shown []AxisValue) string {
	var b strings.Builder
	for i, av := range shown {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(av.Axis)
		b.WriteByte('=')
		b.WriteString(av.Value)
	}
	return b.String()
}

// where names the config in a message: its path, or the built-in host.
func (c *Config) where() string {
	if c.Path == "" {
		return BuiltinName
	}
	return c.Path
}

// onlyWant is --only read: the values each named axis may have. The empty
// onlyWant keeps every cell.
type onlyWant map[string][]string

// parseOnly reads --only entries (see Plan.Filter).
func (c *Config) parseOnly(only []string) (onlyWant, error) {
	want := onlyWant{}
	for _, o := range c.splitOnly(only) {
		k, v, ok := strings.Cut(o, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%w: --only %q: want axis=value", ErrInvalid, o)
		}
		if c.axis(k) == nil {
			return nil, fmt.Errorf("%w: --only %q: no axis named %q (axes: %s)", ErrInvalid, o, k, strings.Join(c.axisNames(), ", "))
		}
		if vals := c.axisValues(k); !slices.Contains(vals, v) {
			return nil, fmt.Errorf("%w: --only %q: axis %s has no value %q (values: %s)%s", ErrInvalid, o, k, v, strings.Join(vals, ", "), SuggestValue(v, vals))
		}
		want[k] = append(want[k], v)
	}
	return want, nil
}

// axisValues are the values a cell can have on axis name: the axis's own,
// then those that [[include]] entries add, each once.
func (c *Config) axisValues(name string) []string {
	var vals []string
	if a := c.axis(name); a != nil {
		for _, v := range a.Values {
			vals = append(vals, v.Name)
		}
	}
	for _, inc := range c.Include {
		if v, ok := inc.Values[name]; ok && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	return vals
}

// SuggestValue names the value of vals that v most likely meant: the one
// v is a part of (a short name the grid shows, "cutlass" for
// "flashinfer_cutlass") when only one is, else the closest by edit
// distance when it is close; "" when none is.
func SuggestValue(v string, vals []string) string {
	var parts []string
	for _, x := range vals {
		if strings.Contains(x, v) {
			parts = append(parts, x)
		}
	}
	if len(parts) == 1 {
		return "; did you mean " + parts[0] + "?"
	}
	best, bestD := "", len(v)/3+1
	for _, x := range vals {
		if d := editDistance(v, x); d < bestD {
			best, bestD = x, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// keeps reports whether a cell of these (shown) values is one --only names.
func (w onlyWant) keeps(values []AxisValue) bool {
	for k, vs := range w {
		v, has := Cell{Values: values}.Value(k)
		if !has || !slices.Contains(vs, v) {
			return false
		}
	}
	return true
}
