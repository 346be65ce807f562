package across

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestYardstickHistory reads the history of the recorded sweeps of the
// built-in simulated host at sim_version 5 and 6 (internal/reports'
// testdata/yardstick, which its TestYardstickRecorded makes with -update):
// at 6 the reference crashes and the run alone cannot judge the CuTe DSL
// pair, so history judges it against 5's yardstick, as bmx history does
// (record.LoadSummary, HistoriesOf): one history, the second run judged
// against the first's yardstick, the pair degraded in both.
func TestYardstickHistory(t *testing.T) {
	t.Parallel()
	const pair = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
	var sums []*record.Summary
	var v5 string
	for _, name := range []string{"v5", "v6"} {
		runs, _ := filepath.Glob(filepath.Join("..", "testdata", "yardstick", name, "*", "run.json"))
		if len(runs) != 1 {
			t.Fatalf("%d recorded runs of %s, want 1 (go test ./internal/reports -run TestYardstickRecorded -update makes them)", len(runs), name)
		}
		// A copy: loading a run writes its summary beside it.
		dir := filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(runs[0])))
		if err := os.CopyFS(dir, os.DirFS(filepath.Dir(runs[0]))); err != nil {
			t.Fatal(err)
		}
		if name == "v5" {
			v5 = filepath.Base(dir)
		}
		s, err := record.LoadSummary(dir)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	hs, err := HistoriesOf(sums)
	if err != nil {
		t.Fatal(err)
	}
	// One history per config and host: both runs are of one.
	if len(hs) != 1 {
		t.Fatalf("%d histories, want one (one config, one host)", len(hs))
	}
	h := hs[0]
	if len(h.Runs) != 2 || !strings.HasPrefix(h.Runs[1].Yardstick, "baseline "+v5) {
		t.Errorf("history's runs: %+v, want the second judged against the first's yardstick", h.Runs)
	}
	found := false
	for _, c := range h.Cells {
		if c.Cell == pair {
			found = true
			if c.Strip != "≈≈" || c.Latest != classify.Degraded {
				t.Errorf("history of the CuTe DSL pair: %s, latest %s; want ≈≈, degraded", c.Strip, c.Latest)
			}
		}
	}
	if !found {
		t.Errorf("no history of the CuTe DSL pair: %+v", h.Cells)
	}
}
