package matrix

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// eagerPlan is the expansion bmx did before Stream, kept as the oracle: it
// builds the whole product, then applies excludes, includes, the reference
// and --only (Filter) one after the other.
func eagerPlan(c *Config, only []string) (*Plan, error) {
	if err := c.checkSize(); err != nil {
		return nil, err
	}
	product := [][]AxisValue{nil}
	for _, a := range c.Axes {
		var next [][]AxisValue
		for _, prefix := range product {
			for _, v := range a.Values {
				next = append(next, append(slices.Clone(prefix), AxisValue{Axis: a.Name, Value: v.Name}))
			}
		}
		product = next
	}
	plan := &Plan{}
	hits := make([]int, len(c.Exclude))
	var kept [][]AxisValue
	for _, combo := range product {
		excluded := false
		for i, ex := range c.Exclude {
			if matches(combo, ex) {
				hits[i]++
				excluded = true
			}
		}
		if excluded {
			plan.Excluded = append(plan.Excluded, c.cell(combo, nil, nil))
		} else {
			kept = append(kept, combo)
		}
	}
	for i, n := range hits {
		if n == 0 {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s: exclude #%d %s matches no cell", c.Path, i+1, formatPairs(c.Exclude[i])))
		}
	}
	extra := make([][]Include, len(kept))
	var added []Include
	for _, inc := range c.Include {
		hit := false
		for i, combo := range kept {
			if matches(combo, inc.Values) {
				extra[i] = append(extra[i], inc)
				hit = true
			}
		}
		if !hit {
			added = append(added, inc)
		}
	}
	seen := map[string]bool{}
	for i, combo := range kept {
		cell := c.cell(combo, nil, extra[i])
		seen[cell.ID] = true
		plan.Cells = append(plan.Cells, cell)
	}
	for _, inc := range added {
		var combo []AxisValue
		for _, a := range c.Axes {
			if v, ok := inc.Values[a.Name]; ok {
				combo = append(combo, AxisValue{Axis: a.Name, Value: v})
			}
		}
		cell := c.cell(combo, nil, []Include{inc})
		if seen[cell.ID] {
			return nil, fmt.Errorf("%w: %s: include %s adds cell %s twice", ErrInvalid, c.Path, formatPairs(inc.Values), cell.ID)
		}
		seen[cell.ID] = true
		plan.Cells = append(plan.Cells, cell)
	}
	if len(plan.Cells) == 0 {
		return nil, errors.New("every cell excluded")
	}
	if len(c.Reference) > 0 {
		var at []int
		for i, cell := range plan.Cells {
			if matches(cell.Values, c.Reference) {
				at = append(at, i)
			}
		}
		if len(at) != 1 {
			return nil, fmt.Errorf("%w: %s: reference %s matches %d cells: it must name exactly one", ErrInvalid, c.Path, formatPairs(c.Reference), len(at))
		}
		ref := plan.Cells[at[0]]
		plan.Reference = ref.ID
		plan.Cells = append([]Cell{ref}, slices.Delete(plan.Cells, at[0], at[0]+1)...)
	}
	return plan, plan.Filter(c, only)
}

// TestStreamIsEagerExpansion: a Stream yields exactly the cells, excluded
// cells, warnings, reference and errors of the eager expansion, for
// excludes, includes that extend or add cells, a reference kept or added,
// secret values and --only.
func TestStreamIsEagerExpansion(t *testing.T) {
	threeAxes := `[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "fruit"
flag = "--fruit"
values = ["apple", "pear", "fig"]
[[axis]]
name = "animal"
env = "ANIMAL"
values = ["cat", "dog"]
[[axis]]
name = "key"
flag = "--api-key"
values = ["sk-live1234567890abcdefXYZ", "none"]
`
	configs := map[string]string{
		"plain":     threeAxes,
		"exclude":   threeAxes + "[[exclude]]\nfruit = \"pear\"\n[[exclude]]\nfruit = \"kiwi\"\n",
		"include":   threeAxes + "[[include]]\nanimal = \"cat\"\nargs = [\"--purr\"]\n[[include]]\nfruit = \"kiwi\"\nenv = { K = \"1\" }\n[[include]]\nfruit = \"fig\"\nanimal = \"dog\"\nargs = [\"--x\"]\n",
		"back":      threeAxes + "[[exclude]]\nfruit = \"pear\"\n[[include]]\nfruit = \"pear\"\nanimal = \"dog\"\n",
		"reference": "reference = { fruit = \"fig\", animal = \"cat\", key = \"none\" }\n" + threeAxes + "[[exclude]]\nanimal = \"dog\"\nfruit = \"apple\"\n",
		"added ref": "reference = { fruit = \"kiwi\" }\n" + threeAxes + "[[include]]\nfruit = \"kiwi\"\n",
		"dup":       threeAxes + "[[include]]\nfruit = \"kiwi\"\n[[include]]\nfruit = \"kiwi\"\n",
		"ref twice": "reference = { fruit = \"fig\" }\n" + threeAxes,
		// An added cell whose ID is a kept cell's, by a comma in a value.
		"comma": "[server]\ncommand = [\"srv\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"1\"]\n[[axis]]\nname = \"b\"\nflag = \"--b\"\nvalues = [\"2\"]\n[[include]]\na = \"1,b=2\"\n",
	}
	onlys := [][]string{nil, {"fruit=apple"}, {"animal=dog", "fruit=fig,key=none"}, {"fruit=kiwi"}, {"fruit=nope"}, {"color=red"}, {"bad"}}
	for name, src := range configs {
		for _, only := range onlys {
			t.Run(name+"/"+strings.Join(only, "+"), func(t *testing.T) {
				want, wantErr := eagerPlan(mustParse(t, src), only)
				s, err := mustParse(t, src).Stream(only)
				if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
					t.Fatalf("error %v, want %v", err, wantErr)
				}
				if err != nil {
					return
				}
				got := s.Plan()
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("plan (-eager +stream):\n%s", d)
				}
				if s.Len() != len(want.Cells) || s.ExcludedLen() != len(want.Excluded) {
					t.Errorf("counted %d cells %d excluded, built %d and %d", s.Len(), s.ExcludedLen(), len(want.Cells), len(want.Excluded))
				}
				checkKeys(t, s, want.Cells)
			})
		}
	}
}

// checkKeys: the stream's keys name its cells in All's order; each key
// builds its cell, and gives its values and ID without building it; Lookup
// finds each cell by its values.
func checkKeys(t *testing.T, s *Stream, cells []Cell) {
	t.Helper()
	keys := s.Keys()
	if len(keys) != len(cells) {
		t.Fatalf("%d keys for %d cells", len(keys), len(cells))
	}
	for i, k := range keys {
		if d := cmp.Diff(cells[i], s.Cell(k)); d != "" {
			t.Errorf("key %d (-cell +built):\n%s", k, d)
		}
		if got := s.AppendValues(nil, k); !slices.Equal(got, cells[i].Values) {
			t.Errorf("key %d: values %v, want %v", k, got, cells[i].Values)
		}
		if id := s.ID(k); id != cells[i].ID {
			t.Errorf("key %d: ID %q, want %q", k, id, cells[i].ID)
		}
		if got := s.Lookup(cells[i].Values); !slices.Contains(got, k) {
			t.Errorf("Lookup(%s) = %v, want it to hold %d", cells[i].ID, got, k)
		}
	}
}

// TestStreamStopsEarly: a loop over All that breaks builds no more cells.
func TestStreamStopsEarly(t *testing.T) {
	s, err := mustParse(t, twoAxes+"[[include]]\nfruit = \"kiwi\"\n").Stream(nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for cell := range s.All() {
		seen = append(seen, cell.ID)
		if len(seen) == 2 {
			break
		}
	}
	if d := cmp.Diff([]string{"fruit=apple,animal=cat", "fruit=apple,animal=dog"}, seen); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestExcludesRemoveEveryCell: a matrix its excludes empty is a config
// error that says so, not an empty run.
func TestExcludesRemoveEveryCell(t *testing.T) {
	_, err := mustParse(t, twoAxes+"[[exclude]]\nfruit = \"apple\"\n[[exclude]]\nfruit = \"pear\"\n").Expand()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "m.toml: the excludes remove every cell the axes span (4)") {
		t.Fatalf("got %v", err)
	}
	// An include that adds a cell of its own leaves something to run.
	plan, err := mustParse(t, twoAxes+"[[exclude]]\nfruit = \"apple\"\n[[exclude]]\nfruit = \"pear\"\n[[include]]\nfruit = \"kiwi\"\n").Expand()
	if err != nil || len(plan.Cells) != 1 {
		t.Fatalf("%v %v", err, plan)
	}
}
