package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Blame says how the cells of one axis value ended, and whether one cause
// explains them: the value, not the rest of the combination, is to blame.
type Blame struct {
	Axis  string `json:"axis"`
	Value string `json:"value"`
	// Cells ran with this value; Failed of them failed.
	Cells  int `json:"cells"`
	Failed int `json:"failed"`
	// Verdicts counts the failed cells by verdict.
	Verdicts map[classify.Verdict]int `json:"verdicts"`
	// Causes are the distinct causes of the failures: a signature, or the
	// verdict where there is none (garbage has no signature).
	Causes []string `json:"causes"`
	// ToBlame: every cell with this value failed, two or more, of one cause,
	// while cells with the axis's other values did not all fail.
	ToBlame bool   `json:"to_blame"`
	Text    string `json:"text"`
}

// Interaction is a pair of values that fail together although each works
// with the other axis's other values.
type Interaction struct {
	A      matrix.AxisValue `json:"a"`
	B      matrix.AxisValue `json:"b"`
	Cells  int              `json:"cells"`
	Causes []string         `json:"causes"`
	Text   string           `json:"text"`
}

// BlameTable is the blame of every axis value that has a failed cell, and
// the pairs that fail only together, computed from results alone (old runs
// included).
type BlameTable struct {
	Values       []Blame       `json:"values"`
	Interactions []Interaction `json:"interactions,omitempty"`
}

// ran reports a result of a cell that ran to a verdict that tells something
// of the backends (not skipped, excluded or inconclusive).
func ran(r record.Result) bool {
	switch r.Verdict {
	case classify.Skipped, classify.Excluded, classify.Inconclusive, "predicted":
		return false
	}
	return true
}

func causeOf(r record.Result) string {
	if r.Signature != "" {
		return string(r.Verdict) + ": " + r.Signature
	}
	return string(r.Verdict)
}

// Blame computes the blame table.
func BlameOf(rep *record.Report) BlameTable {
	bt := BlameTable{Values: []Blame{}}
	for _, a := range rep.Run.Axes {
		for _, v := range sweptValues(rep, a) {
			b := blameValue(rep, a.Name, v)
			if b.Failed > 0 {
				bt.Values = append(bt.Values, b)
			}
		}
	}
	blamed := map[matrix.AxisValue]bool{}
	for _, b := range bt.Values {
		if b.ToBlame {
			blamed[matrix.AxisValue{Axis: b.Axis, Value: b.Value}] = true
		}
	}
	bt.Interactions = interactions(rep, blamed)
	return bt
}

// sweptValues are an axis's values as the config lists them, then those
// only an [[include]] brought, in the order the results first show them: a
// value swept by includes alone (a bug's switch turned on for a few cells)
// is blamed like any other.
func sweptValues(rep *record.Report, a record.AxisValues) []string {
	values := slices.Clone(a.Values)
	seen := map[string]bool{}
	for _, v := range values {
		seen[v] = true
	}
	for _, r := range rep.Results {
		if v, ok := r.Cell.Value(a.Name); ok && !seen[v] {
			seen[v] = true
			values = append(values, v)
		}
	}
	return values
}

// Blamed is the axis values rep's blame table holds to blame, in its
// order: the values a later sweep with rep as its baseline starts late.
func Blamed(rep *record.Report) []matrix.AxisValue {
	var out []matrix.AxisValue
	for _, b := range BlameOf(rep).Values {
		if b.ToBlame {
			out = append(out, matrix.AxisValue{Axis: b.Axis, Value: b.Value})
		}
	}
	return out
}

func blameValue(rep *record.Report, axis, value string) Blame {
	b := Blame{Axis: axis, Value: value, Verdicts: map[classify.Verdict]int{}}
	causes := map[string]bool{}
	othersAllFail, others := true, 0
	for _, r := range rep.Results {
		if !ran(r) {
			continue
		}
		v, ok := r.Cell.Value(axis)
		if !ok {
			continue
		}
		if v != value {
			others++
			othersAllFail = othersAllFail && failed(r.Verdict)
			continue
		}
		b.Cells++
		if failed(r.Verdict) {
			b.Failed++
			b.Verdicts[r.Verdict]++
			causes[causeOf(r)] = true
		}
	}
	b.Causes = slices.Sorted(maps.Keys(causes))
	b.ToBlame = b.Failed == b.Cells && b.Cells >= 2 && len(b.Causes) == 1 && others > 0 && !othersAllFail
	if len(b.Verdicts) == 1 {
		for v := range b.Verdicts {
			b.Text = fmt.Sprintf("%s=%s: %s in %d of %d cells", axis, value, v, b.Failed, b.Cells)
		}
	} else {
		var vs []string
		for _, v := range slices.Sorted(maps.Keys(b.Verdicts)) {
			vs = append(vs, fmt.Sprintf("%s %d", v, b.Verdicts[v]))
		}
		b.Text = fmt.Sprintf("%s=%s: failed in %d of %d cells (%s)", axis, value, b.Failed, b.Cells, strings.Join(vs, ", "))
	}
	switch {
	case b.ToBlame:
		b.Text = strings.Replace(b.Text, ": ", ": TO BLAME: ", 1) + ", one cause: " + b.Causes[0]
	case len(b.Causes) == 1:
		b.Text += ", one cause"
	default:
		b.Text += fmt.Sprintf(", %d causes", len(b.Causes))
	}
	return b
}

// interactions finds pairs a=x, b=y whose cells all fail while the cells
// with a=x and another b, and with b=y and another a, all pass (cells with a
// value already to blame aside): the two work apart and fail together.
// Each pair of axes is counted in one pass over the results (per value
// pair, per value of each), so two axes of 100 values cost 10,000 cells,
// not 10,000 value pairs times 10,000 cells.
func interactions(rep *record.Report, blamed map[matrix.AxisValue]bool) []Interaction {
	var out []Interaction
	axes := rep.Run.Axes
	for i := range axes {
		for j := i + 1; j < len(axes); j++ {
			t := tallyPair(rep, axes[i].Name, axes[j].Name, blamed)
			for _, x := range axes[i].Values {
				for _, y := range axes[j].Values {
					if in, ok := t.interaction(axes[i].Name, x, axes[j].Name, y, blamed); ok {
						out = append(out, in)
					}
				}
			}
		}
	}
	return out
}

// tally counts cells and failed cells.
type tally struct{ cells, failed int }

// pairTally is what the cells of one pair of axes, a and b, show: per value
// pair, per value of a and per value of b, and the causes of each pair's
// failed cells.
type pairTally struct {
	pair   map[[2]string]tally
	causes map[[2]string]map[string]bool
	a, b   map[string]tally
}

// tallyPair counts the cells that ran, have a value on both axes a and b,
// and no value to blame.
func tallyPair(rep *record.Report, a, b string, blamed map[matrix.AxisValue]bool) pairTally {
	t := pairTally{pair: map[[2]string]tally{}, causes: map[[2]string]map[string]bool{}, a: map[string]tally{}, b: map[string]tally{}}
	count := func(m map[string]tally, v string, fail bool) {
		c := m[v]
		c.cells++
		if fail {
			c.failed++
		}
		m[v] = c
	}
	for _, r := range rep.Results {
		if !ran(r) || slices.ContainsFunc(r.Cell.Values, func(av matrix.AxisValue) bool { return blamed[av] }) {
			continue
		}
		va, okA := r.Cell.Value(a)
		vb, okB := r.Cell.Value(b)
		if !okA || !okB {
			continue
		}
		fail := failed(r.Verdict)
		key := [2]string{va, vb}
		c := t.pair[key]
		c.cells++
		if fail {
			c.failed++
			if t.causes[key] == nil {
				t.causes[key] = map[string]bool{}
			}
			t.causes[key][causeOf(r)] = true
		}
		t.pair[key] = c
		count(t.a, va, fail)
		count(t.b, vb, fail)
	}
	return t
}

func (t pairTally) interaction(a, x, b, y string, blamed map[matrix.AxisValue]bool) (Interaction, bool) {
	in := Interaction{A: matrix.AxisValue{Axis: a, Value: x}, B: matrix.AxisValue{Axis: b, Value: y}}
	if blamed[in.A] || blamed[in.B] {
		return in, false
	}
	// Together: every cell fails. Apart (a=x with another b, b=y with
	// another a): at least one cell each, none failing.
	both, withX, withY := t.pair[[2]string{x, y}], t.a[x], t.b[y]
	aloneA, aloneB := withX.cells-both.cells, withY.cells-both.cells
	if both.cells == 0 || both.failed != both.cells || withX.failed != both.failed || withY.failed != both.failed || aloneA == 0 || aloneB == 0 {
		return in, false
	}
	in.Cells = both.cells
	in.Causes = slices.Sorted(maps.Keys(t.causes[[2]string{x, y}]))
	in.Text = fmt.Sprintf("%s=%s with %s=%s: fails in %d of %d cells together (%s), works with every other %s and every other %s",
		a, x, b, y, in.Cells, in.Cells, clip(strings.Join(in.Causes, "; "), 80), b, a)
	if len(blamed) > 0 {
		in.Text += " (cells with a value to blame aside)"
	}
	return in, true
}

// Lines are the table's rows as text: values to blame first, then the other
// failing values, then interactions.
func (bt BlameTable) Lines() []string {
	var blamed, rest []string
	for _, b := range bt.Values {
		if b.ToBlame {
			blamed = append(blamed, b.Text)
		} else {
			rest = append(rest, b.Text)
		}
	}
	out := append(blamed, rest...)
	for _, in := range bt.Interactions {
		out = append(out, in.Text)
	}
	return out
}
