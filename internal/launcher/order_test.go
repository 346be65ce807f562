package launcher

import (
	"slices"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

func TestOrderCellsCoversEveryValueEarly(t *testing.T) {
	cfg, err := matrix.Builtin(nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Order = matrix.OrderInformative
	got := OrderCells(cfg, plan.Cells, plan.Reference, nil, nil, nil)
	if len(got) != len(plan.Cells) || got[0].ID != plan.Reference {
		t.Fatalf("reference %s not first, or cells lost: %d of %d", plan.Reference, len(got), len(plan.Cells))
	}
	// 3 moe runners x 4 FP4 GEMMs: the first 5 cells cover every value,
	// those no known issue expects to fail first (moe_runner=
	// flashinfer_trtllm is a known crash in every cell, so it comes fifth).
	seen := map[matrix.AxisValue]bool{}
	for i, c := range got[:5] {
		for _, av := range c.Values {
			seen[av] = true
		}
		known := slices.ContainsFunc(cfg.Known, func(k matrix.Known) bool { return k.Matches(c) })
		if known != (i == 4) {
			t.Errorf("cell %d %s: known failure %v", i, c.ID, known)
		}
	}
	if len(seen) != 7 {
		t.Errorf("the first 5 cells cover %d of 7 values: %v", len(seen), got[:5])
	}
	// Deterministic, and a permutation of the plan.
	again := OrderCells(cfg, plan.Cells, plan.Reference, nil, nil, nil)
	if !slices.EqualFunc(got, again, func(a, b matrix.Cell) bool { return a.ID == b.ID }) {
		t.Error("two orderings of the same cells differ")
	}
	ids := func(cs []matrix.Cell) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(got), ids(plan.Cells)) {
		t.Error("the order is not a permutation of the plan")
	}
	cfg.Order = matrix.OrderFile
	if f := OrderCells(cfg, plan.Cells, plan.Reference, nil, nil, nil); !slices.EqualFunc(f, plan.Cells, func(a, b matrix.Cell) bool { return a.ID == b.ID }) {
		t.Error("order = file changed the plan's order")
	}
}

func TestOrderKeys(t *testing.T) {
	src := "[server]\ncommand = [\"x\", \"{port}\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\"]\n"
	cfg, err := matrix.Parse("t.toml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Order != matrix.OrderFile || cfg.Prune || cfg.PruneAfter != matrix.DefaultPruneAfter {
		t.Errorf("defaults: order %q prune %v after %d", cfg.Order, cfg.Prune, cfg.PruneAfter)
	}
	if _, err := matrix.Parse("t.toml", []byte("order = \"random\"\n"+src), nil); err == nil {
		t.Error("order = random accepted")
	}
	if _, err := matrix.Parse("t.toml", []byte("prune_after = 1\n"+src), nil); err == nil {
		t.Error("prune_after = 1 accepted")
	}
	cfg, err = matrix.Parse("t.toml", []byte("order = \"file\"\nprune = true\nprune_after = 3\n"+src), nil)
	if err != nil || cfg.Order != matrix.OrderFile || !cfg.Prune || cfg.PruneAfter != 3 {
		t.Errorf("order file, prune 3: %v %+v", err, cfg)
	}
}
