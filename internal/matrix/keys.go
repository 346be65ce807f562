package matrix

import "slices"

// A key names one cell of a Stream without building it: a combination's
// position in the product of the axes (the first axis varying slowest), or,
// past the product, an include's added cell. A sweep of a million cells
// holds its cells to run as keys (8 bytes each) and builds each cell, its
// argv and environment (about 2 KB), only when the cell starts.

// Keys are the keys of the cells All yields, in All's order.
func (s *Stream) Keys() []int {
	keys := make([]int, 0, s.n)
	if k, ok := s.refKey(); ok {
		keys = append(keys, k)
	}
	c, pos := s.cfg, -1
	c.combos(func(combo, shown []AxisValue) bool {
		pos++
		if pos == s.refPos || c.excludedCombo(combo) || !s.only.keeps(shown) {
			return true
		}
		keys = append(keys, pos)
		return true
	})
	p := s.product()
	for j, cell := range s.added {
		if j != s.refAdded && s.only.keeps(cell.Values) {
			keys = append(keys, p+j)
		}
	}
	return keys
}

// refKey is the reference cell's key; false when there is none.
func (s *Stream) refKey() (int, bool) {
	switch {
	case s.ref == nil:
		return 0, false
	case s.refAdded >= 0:
		return s.product() + s.refAdded, true
	}
	return s.refPos, true
}

// product is the number of combinations of the axes' values (checkSize
// bounds it).
func (s *Stream) product() int {
	n := 1
	for _, a := range s.cfg.Axes {
		n *= len(a.Values)
	}
	return n
}

// combo sets combo and shown to the values of combination k.
func (s *Stream) combo(k int, combo, shown []AxisValue) {
	axes := s.cfg.Axes
	for i := len(axes) - 1; i >= 0; i-- {
		a := &axes[i]
		n := len(a.Values)
		j := k % n
		k /= n
		combo[i] = AxisValue{Axis: a.Name, Value: a.Values[j].Name}
		shown[i] = AxisValue{Axis: a.Name, Value: s.shownOf[i][j]}
	}
}

// Cell builds the cell of key k, as All builds it.
func (s *Stream) Cell(k int) Cell {
	if j := k - s.product(); j >= 0 {
		return s.added[j]
	}
	combo := make([]AxisValue, len(s.cfg.Axes))
	shown := make([]AxisValue, len(s.cfg.Axes))
	s.combo(k, combo, shown)
	return s.cfg.cell(combo, shown, s.cfg.includesOf(combo))
}

// AppendValues appends the (shown) values of the cell of key k to buf, as
// the built cell's Values, without building it.
func (s *Stream) AppendValues(buf []AxisValue, k int) []AxisValue {
	if j := k - s.product(); j >= 0 {
		return append(buf, s.added[j].Values...)
	}
	n := len(buf)
	buf = append(buf, make([]AxisValue, 2*len(s.cfg.Axes))...)
	shown := buf[n : n+len(s.cfg.Axes)]
	s.combo(k, buf[n+len(s.cfg.Axes):], shown)
	return buf[:n+len(s.cfg.Axes)]
}

// ID is the ID of the cell of key k, without building it.
func (s *Stream) ID(k int) string {
	if j := k - s.product(); j >= 0 {
		return s.added[j].ID
	}
	return joinID(s.AppendValues(nil, k))
}

// Lookup is the keys of the cells, among every cell of the config that no
// exclude removes (--only aside), whose (shown) values are values, in key
// order: at most one, since cell IDs are unique.
func (s *Stream) Lookup(values []AxisValue) []int {
	var keys []int
	axes := s.cfg.Axes
	if k, ok := s.position(values); ok {
		combo := make([]AxisValue, len(axes))
		s.combo(k, combo, make([]AxisValue, len(axes)))
		if !s.cfg.excludedCombo(combo) {
			keys = append(keys, k)
		}
	}
	p := s.product()
	for j, cell := range s.added {
		if slices.Equal(cell.Values, values) {
			keys = append(keys, p+j)
		}
	}
	return keys
}

// position is the combination whose shown values are values; false when
// values are not one value of each axis, in the axes' order.
func (s *Stream) position(values []AxisValue) (int, bool) {
	axes := s.cfg.Axes
	if len(values) != len(axes) {
		return 0, false
	}
	k := 0
	for i, a := range axes {
		j := slices.Index(s.shownOf[i], values[i].Value)
		if values[i].Axis != a.Name || j < 0 {
			return 0, false
		}
		k = k*len(a.Values) + j
	}
	return k, true
}
