package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/reports/across"
)

// TestHistory sweeps a simulated host at twelve versions through real bmx
// processes and renders the history of the runs, given in shuffled order,
// in every format: the flip (crash from run 7, with the sglang version that
// came with it), the flake (named flaky) and the perf drop (from run 10)
// show in each.
func TestHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := acrossConfig(t, dir, "hist", "")
	runs := sweepVersions(t, cfg, filepath.Join(dir, "runs"), []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	shuffled := slices.Clone(runs)
	slices.Reverse(shuffled)
	shuffled[0], shuffled[5] = shuffled[5], shuffled[0]

	render := func(format string) string {
		t.Helper()
		code, stdout, stderr := runBMX(t, append([]string{"history", "--format", format}, shuffled...)...)
		if code != 0 {
			t.Fatalf("history --format %s: exit %d\n%s", format, code, stderr)
		}
		return stdout
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
		var hs []across.History
		if err := json.Unmarshal([]byte(render("json")), &hs); err != nil || len(hs) != 1 {
			t.Fatalf("want one history (one config on one host): %d, %v", len(hs), err)
		}
		h := hs[0]
		if len(h.Runs) != 12 || len(h.Cells) != 3 || h.Runs[0].Dir != runs[0] {
			t.Fatalf("%d runs (first %s), %d cells; want 12 in time order, 3", len(h.Runs), h.Runs[0].Dir, len(h.Cells))
		}
		byCell := map[string]across.CellHistory{}
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
		out := filepath.Join(dir, "history.html")
		if code, _, stderr := runBMX(t, append([]string{"history", "--format", "html", "-o", out}, shuffled...)...); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		page := string(mustRead(t, out))
		for _, w := range []string{`id="` + across.CellAnchor(flip) + `"`, `<svg class="chart"`, `<span class="flaky">flaky</span>`, "perf-regression in run 10", "correct -&gt; crash in run 7", `class="v v-garbage"`} {
			if !strings.Contains(page, w) {
				t.Errorf("the page lacks %q", w)
			}
		}
		if strings.Contains(page, "<script") || strings.Count(page, "<svg") != 3 {
			t.Errorf("want a chart per cell (3) and no scripts: %d charts, script %v", strings.Count(page, "<svg"), strings.Contains(page, "<script"))
		}
	})
}

// TestHistoryFlags: a bad format or a directory that is not a run is one
// line naming it, exit 2.
func TestHistoryFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--format", "csv", "x"}, `--format "csv": one of table, md, json, html`},
		{[]string{"history", t.TempDir()}, "is not a bmx run directory"},
		{[]string{"history"}, "requires at least 1 arg"},
	} {
		code, _, stderr := bmx(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestHistoryGroups: bmx history and publish over a folder (the README's
// runs/*) that holds runs of two configs, a run of one of them stopped by
// a broken setup, and a stray file, through real bmx processes. history
// writes one titled table per config; the stopped run's setup cell is no
// crash and makes no cell flaky; the stray file is skipped with one line
// on stderr, by publish too.
func TestHistoryGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	cfg := acrossConfig(t, dir, "hist", "")
	sweepVersions(t, cfg, runs, []int{1, 2})
	// The same config with a profile that is not there: its first cell's
	// server refuses its command line and the sweep stops there.
	text := string(mustRead(t, cfg))
	broken := filepath.Join(dir, "broken.toml")
	if err := os.WriteFile(broken, []byte(strings.Replace(text, filepath.Join(dir, "profile.toml"), "nope.toml", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runBMX(t, "sweep", "-q", "-c", broken, "--out", runs); code != ExitInfra || !strings.Contains(stderr, "the setup is broken") {
		t.Fatalf("sweep of a broken setup: exit %d\n%s", code, stderr)
	}
	sweepVersions(t, cfg, runs, []int{3})
	sweepVersions(t, acrossConfig(t, filepath.Join(dir, "other"), "other", ""), runs, []int{1})
	stray := filepath.Join(runs, "notes.txt")
	if err := os.WriteFile(stray, []byte("not a run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all, _ := filepath.Glob(filepath.Join(runs, "*"))

	code, stdout, stderr := runBMX(t, append([]string{"history"}, all...)...)
	if code != ExitOK {
		t.Fatalf("history: exit %d\n%s", code, stderr)
	}
	if strings.TrimSpace(stderr) != "bmx: note: skipped: "+stray+" is not a bmx run directory: open "+filepath.Join(stray, "run.json")+": not a directory" {
		t.Errorf("stderr: want one line skipping %s:\n%s", stray, stderr)
	}
	hist, other := strings.Index(stdout, "== hist on no GPU on "), strings.Index(stdout, "== other on no GPU on ")
	if hist < 0 || other < hist {
		t.Fatalf("want a titled table for hist, then one for other:\n%s", stdout)
	}
	histTable, otherTable := stdout[hist:other], stdout[other:]
	flip := "moe_runner=flashinfer_cutlass"
	if line := linesWith(histTable, flip+"  "); !strings.Contains(line, "✓✓·✓") || strings.Contains(line, "FLAKY") {
		t.Errorf("hist: the stopped run's setup cell counted as a verdict: %s", line)
	}
	if !strings.Contains(histTable, "history of 3 cells over 4 runs") || !strings.Contains(otherTable, "history of 3 cells over 1 runs") {
		t.Errorf("runs not grouped by config:\n%s", stdout)
	}
	if !strings.Contains(histTable, "(stopped on a broken setup after "+flip+": the cells it did not finish are not counted)") {
		t.Errorf("hist does not say which run stopped on a broken setup:\n%s", histTable)
	}

	code, stdout, stderr = runBMX(t, append([]string{"publish", "--out", filepath.Join(dir, "site")}, all...)...)
	if code != ExitOK || strings.Count(stderr, "bmx: note: skipped: ") != 1 || !strings.Contains(stdout, "  hist: latest of 4 run(s)") || !strings.Contains(stdout, "  other: latest of 1 run(s)") {
		t.Errorf("publish: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
