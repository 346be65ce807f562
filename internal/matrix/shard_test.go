package matrix

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in      string
		want    Shard
		wantErr string
	}{
		{in: "0/1", want: Shard{0, 1}},
		{in: "2/3", want: Shard{2, 3}},
		{in: " 1 / 4 ", want: Shard{1, 4}},
		{in: "3/3", wantErr: "0 <= i < n"},
		{in: "-1/3", wantErr: "0 <= i < n"},
		{in: "0/0", wantErr: "0 <= i < n"},
		{in: "1", wantErr: "want i/n"},
		{in: "a/b", wantErr: "want i/n"},
		{in: "", wantErr: "want i/n"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseShard(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseShard(%q) = %v, %v; want error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseShard(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got.String() != strings.ReplaceAll(tt.in, " ", "") {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

// axesConfig is a config of the axes given, in that order, each "name:v1,v2".
func axesConfig(t *testing.T, reference string, axes ...string) *Config {
	t.Helper()
	var b strings.Builder
	if reference != "" {
		fmt.Fprintf(&b, "reference = { %s }\n", reference)
	}
	b.WriteString("[server]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n")
	for _, a := range axes {
		name, vals, _ := strings.Cut(a, ":")
		var quoted []string
		for _, v := range strings.Split(vals, ",") {
			quoted = append(quoted, fmt.Sprintf("%q", v))
		}
		fmt.Fprintf(&b, "[[axis]]\nname = %q\nflag = \"--%s\"\nvalues = [%s]\n", name, name, strings.Join(quoted, ", "))
	}
	src := b.String()
	return mustParse(t, src)
}

// byValues maps each cell's sorted axis=value pairs to its shard, so plans
// whose IDs differ (axes in another order) can be compared.
func byValues(p *Plan, a Assignment) map[string]int {
	out := map[string]int{}
	for _, c := range p.Cells {
		if s, ok := a.Of[c.ID]; ok {
			out[cellKey(c)] = s
		}
	}
	return out
}

func expand(t *testing.T, cfg *Config) *Plan {
	t.Helper()
	p, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAssignBalanced(t *testing.T) {
	for _, tt := range []struct {
		axes []string
		ref  string
	}{
		{axes: []string{"moe:a,b,c", "gemm:w,x,y,z"}, ref: `moe = "a", gemm = "w"`},
		{axes: []string{"moe:a,b,c", "gemm:w,x,y,z"}},
		{axes: []string{"a:1,2,3,4,5", "b:1,2,3,4", "c:1,2,3"}, ref: `a = "2", b = "3", c = "1"`},
		{axes: []string{"a:1,2"}, ref: `a = "1"`},
		{axes: []string{"a:1,2,3,4,5,6,7"}},
	} {
		cfg := axesConfig(t, tt.ref, tt.axes...)
		plan := expand(t, cfg)
		for n := 1; n <= 9; n++ {
			t.Run(fmt.Sprintf("%s/%d", strings.Join(tt.axes, "x"), n), func(t *testing.T) {
				a := plan.Assign(n)
				// Every cell in exactly one shard, the reference in every
				// shard that runs another cell.
				seen := map[string]int{}
				var dealt []int
				for i := range n {
					cells := a.Cells(plan.Cells, i)
					others := 0
					for j, c := range cells {
						seen[c.ID]++
						if c.ID == plan.Reference {
							if j != 0 {
								t.Errorf("shard %d: reference at position %d, want first", i, j)
							}
							continue
						}
						others++
					}
					dealt = append(dealt, others)
					runsRef := slices.ContainsFunc(cells, func(c Cell) bool { return c.ID == plan.Reference })
					if plan.Reference != "" && runsRef != (others > 0 || i == 0) {
						t.Errorf("shard %d with %d other cells runs the reference: %v", i, others, runsRef)
					}
				}
				for _, c := range plan.Cells {
					want := 1
					if c.ID == plan.Reference {
						want = 0
						for i := range n {
							if a.RunsReference(i) {
								want++
							}
						}
					}
					if seen[c.ID] != want {
						t.Errorf("cell %s runs %d times, want %d", c.ID, seen[c.ID], want)
					}
				}
				if slices.Max(dealt)-slices.Min(dealt) > 1 {
					t.Errorf("shard sizes %v differ by more than one", dealt)
				}
				if d := cmp.Diff(a, plan.Assign(n)); d != "" {
					t.Errorf("a second assignment differs:\n%s", d)
				}
			})
		}
	}
}

// TestAssignStable: reordering the axes or their values moves no cell; adding
// values moves few of the cells that were there before.
func TestAssignStable(t *testing.T) {
	const n = 3
	const ref = `moe = "a", gemm = "w", attn = "fa"`
	base := axesConfig(t, ref, "moe:a,b,c", "gemm:w,x,y,z", "attn:fa,tri")
	basePlan := expand(t, base)
	want := byValues(basePlan, basePlan.Assign(n))

	t.Run("reordered axes and values", func(t *testing.T) {
		cfg := axesConfig(t, `attn = "fa", gemm = "w", moe = "a"`, "attn:tri,fa", "gemm:z,y,x,w", "moe:c,a,b")
		plan := expand(t, cfg)
		if plan.Cells[5].ID == basePlan.Cells[5].ID {
			t.Fatalf("the reordered config has the same cell IDs: the test tests nothing")
		}
		if d := cmp.Diff(want, byValues(plan, plan.Assign(n))); d != "" {
			t.Errorf("assignment changed with the order of axes (-before +after):\n%s", d)
		}
	})
	for _, tt := range []struct {
		name string
		axes []string
	}{
		{"a value on the first axis", []string{"moe:a,b,c,d", "gemm:w,x,y,z", "attn:fa,tri"}},
		{"a value on the last axis", []string{"moe:a,b,c", "gemm:w,x,y,z", "attn:fa,tri,torch"}},
		{"two values in the middle", []string{"moe:a,b,c", "gemm:v,w,x,y,z,zz", "attn:fa,tri"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := expand(t, axesConfig(t, ref, tt.axes...))
			got := byValues(plan, plan.Assign(n))
			moved := 0
			for k, s := range want {
				if got[k] != s {
					moved++
				}
			}
			added := len(got) - len(want)
			// Round-robin over a fixed order would move about two thirds of
			// the cells; dealing by values moves at most one per cell added.
			if moved > added {
				t.Errorf("%d of %d cells changed shard after adding %d cells", moved, len(want), added)
			}
			t.Logf("%d cells added, %d of %d moved", added, moved, len(want))
		})
	}
}

func TestKeepShard(t *testing.T) {
	plan := expand(t, axesConfig(t, `moe = "b", gemm = "x"`, "moe:a,b,c,d", "gemm:w,x,y,z"))
	all := slices.Clone(plan.Cells)
	var union []string
	for i := range 3 {
		p := *plan
		p.Cells = slices.Clone(all)
		a := p.KeepShard(Shard{Index: i, Count: 3})
		if p.Cells[0].ID != plan.Reference {
			t.Errorf("shard %d starts with %s, want the reference %s", i, p.Cells[0].ID, plan.Reference)
		}
		if len(p.Cells) != 6 {
			t.Errorf("shard %d has %d cells, want 6 (5 and the reference)", i, len(p.Cells))
		}
		if a.Sizes()[i] != len(p.Cells) {
			t.Errorf("Sizes()[%d] = %d, want %d", i, a.Sizes()[i], len(p.Cells))
		}
		for _, c := range p.Cells[1:] {
			union = append(union, c.ID)
		}
	}
	slices.Sort(union)
	var want []string
	for _, c := range all[1:] {
		want = append(want, c.ID)
	}
	slices.Sort(want)
	if d := cmp.Diff(want, union); d != "" {
		t.Errorf("the shards together (-want +got):\n%s", d)
	}
}
