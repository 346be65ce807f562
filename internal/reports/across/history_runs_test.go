package across

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// historyRunsDir holds the recorded runs TestHistoryRecorded reads: twelve
// sweeps of one simulated host (matrixtest.AcrossProfile), at versions 1
// to 12 in order (historyRuns makes them with -update).
var historyRunsDir = filepath.Join("testdata", "history")

// historyRuns builds bmx, sweeps one simulated host at versions 1 to 12,
// one sweep after another, and records the run directories under out,
// replacing what was there, as publishRuns does (matrixtest.RecordRun: no reports or
// summary, each log's end).
func historyRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	runs, err := sweepHost(bmx, filepath.Join(work, "h"), "NVIDIA H200 (simulated host H)", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if err := matrixtest.RecordRun(r, filepath.Join(out, filepath.Base(r))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryRecorded renders the history of the recorded sweeps of a
// simulated host at versions 1 to 12 (testdata/history; go test
// ./internal/reports/across -run TestHistoryRecorded -update sweeps them again),
// given in shuffled order, in every format, as bmx history does
// (record.LoadSummary, HistoriesOf, RenderHistories): the flip (crash from
// run 7, with the sglang version that came with it), the flake (named
// flaky, 6 changes) and the perf drop (from run 10) show in each.
func TestHistoryRecorded(t *testing.T) {
	t.Parallel()
	if *update {
		historyRuns(t, historyRunsDir)
	}
	dir := t.TempDir()
	// A copy: loading a run writes its summary beside it.
	if err := os.CopyFS(dir, os.DirFS(historyRunsDir)); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(runs) != 12 {
		t.Fatalf("%d recorded runs under %s, want 12 (go test ./internal/reports/across -run TestHistoryRecorded -update makes them)", len(runs), historyRunsDir)
	}
	shuffled := slices.Clone(runs)
	slices.Reverse(shuffled)
	shuffled[0], shuffled[5] = shuffled[5], shuffled[0]
	var sums []*record.Summary
	for _, r := range shuffled {
		s, err := record.LoadSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	hs, err := HistoriesOf(sums)
	if err != nil {
		t.Fatal(err)
	}
	render := func(format string) string {
		t.Helper()
		var b bytes.Buffer
		if err := RenderHistories(&b, hs, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		return b.String()
	}
	flip, flake, slow := "moe_runner=flashinfer_cutlass", "moe_runner=flashinfer_cutedsl", "moe_runner=flashinfer_trtllm"
	for _, format := range []string{"table", "md"} {
		t.Run(format, func(t *testing.T) {
			out := render(format)
			checks := map[string][]string{
				flip:  {"✓✓✓✓✓✓↯↯↯↯↯↯", "correct -> crash in run 7", "sglang 0.5.6.dev0+sim -> 0.5.7.dev0+sim"},
				flake: {"✓✓‽✓‽✓✓✓‽✓✓✓", "FLAKY (6 changes)"},
				slow:  {"✓✓✓✓✓✓✓✓✓✓✓✓", "perf-regression in run 10", "sglang 0.5.9.dev0+sim -> 0.5.10.dev0+sim"},
			}
			for cell, wants := range checks {
				line := linesWith(out, cell)
				for _, w := range wants {
					if !strings.Contains(line, w) {
						t.Errorf("%s: the line of %s does not say %q:\n%s", format, cell, w, line)
					}
				}
			}
			if strings.Contains(linesWith(out, flip), "FLAKY") {
				t.Errorf("the one flip is called flaky: %s", linesWith(out, flip))
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var hs []History
		if err := json.Unmarshal([]byte(render("json")), &hs); err != nil || len(hs) != 1 {
			t.Fatalf("want one history (one config on one host): %d, %v", len(hs), err)
		}
		h := hs[0]
		if len(h.Runs) != 12 || len(h.Cells) != 3 || h.Runs[0].Dir != runs[0] {
			t.Fatalf("%d runs (first %s), %d cells; want 12 in time order (first %s), 3", len(h.Runs), h.Runs[0].Dir, len(h.Cells), runs[0])
		}
		byCell := map[string]CellHistory{}
		for _, c := range h.Cells {
			byCell[c.Cell] = c
		}
		if c := byCell[flip]; c.Flaky || c.LastChange == nil || c.LastChange.Run != 6 || c.LastChange.To != "crash" {
			t.Errorf("flip: %+v", c.LastChange)
		}
		if c := byCell[flake]; !c.Flaky || c.Changes != 6 {
			t.Errorf("flake: flaky %v, %d changes", c.Flaky, c.Changes)
		}
		if c := byCell[slow]; c.PerfShift == nil || c.PerfShift.Run != 9 || c.PerfShift.Kind != "perf-regression" || c.PerfShift.To >= c.PerfShift.From {
			t.Errorf("perf drop: %+v", c.PerfShift)
		}
	})
	t.Run("html", func(t *testing.T) {
		page := render("html")
		for _, w := range []string{`id="` + CellAnchor(flip) + `"`, `<svg class="chart"`, `<span class="flaky">flaky</span>`, "perf-regression in run 10", "correct -&gt; crash in run 7", `class="v v-garbage"`} {
			if !strings.Contains(page, w) {
				t.Errorf("the page lacks %q", w)
			}
		}
		if strings.Contains(page, "<script") || strings.Count(page, "<svg") != 3 {
			t.Errorf("want a chart per cell (3) and no scripts: %d charts, script %v", strings.Count(page, "<svg"), strings.Contains(page, "<script"))
		}
	})
}

// linesWith are the lines of text that contain s, joined.
func linesWith(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
