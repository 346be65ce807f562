package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/reports/across"
)

// TestHistory runs bmx history as a process on two tiny runs of one
// config, given newest first: it exits 0 with nothing on stderr, and its
// table follows each cell through both runs in time order (the crash in
// run 2); -o writes the JSON to a file and says so on stderr. What history says of real sweeps
// (strips, the flip with its fingerprint diff, the flaky cell, the perf
// shift, in every format) is reports/across's TestHistoryRecorded, on
// recorded runs of real sweeps.
func TestHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := filepath.Join(dir, "runs", "1"), filepath.Join(dir, "runs", "2")
	writeNamedRun(t, first, "nightly", 1, classify.Correct, classify.Correct, classify.Garbage)
	writeNamedRun(t, second, "nightly", 2, classify.Correct, classify.Crash, classify.Garbage)
	code, stdout, stderr := runBMX(t, "history", second, first)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for cell, want := range map[string]string{"moe=a ": "✓✓", "moe=b ": "✓↯", "moe=c ": "‽‽"} {
		if line := linesWith(stdout, cell); !strings.Contains(line, want) {
			t.Errorf("the line of %s does not show %s:\n%s", cell, want, stdout)
		}
	}
	if !strings.Contains(linesWith(stdout, "moe=b: "), "correct -> crash in run 2") {
		t.Errorf("no change in run 2 for moe=b:\n%s", stdout)
	}
	out := filepath.Join(dir, "history.json")
	if code, stdout, stderr := runBMX(t, "history", "--format", "json", "-o", out, first, second); code != ExitOK || stdout != "" || strings.TrimSpace(stderr) != "bmx: wrote "+out {
		t.Fatalf("-o: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var hs []across.History
	if err := json.Unmarshal(mustRead(t, out), &hs); err != nil || len(hs) != 1 || len(hs[0].Runs) != 2 || hs[0].Runs[0].Dir != first {
		t.Errorf("history.json: want one history of 2 runs, %s first: %v\n%s", first, err, mustRead(t, out))
	}
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
// a broken setup, and a stray file. The runs are the ones reports/across
// records from real sweeps (testdata/groups), where TestHistoryGroups
// checks the grouping itself; here is the command: history writes one
// titled table per config (the stopped run's setup cell no crash, no cell
// flaky); the stray file is skipped with one line on stderr, by publish
// too.
func TestHistoryGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// A copy: loading a run writes its summary beside it.
	copyRecorded(t, filepath.Join("..", "..", "internal", "reports", "across", "testdata", "groups"), runs)
	stray := filepath.Join(runs, "notes.txt")
	if err := os.WriteFile(stray, []byte("not a run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all, _ := filepath.Glob(filepath.Join(runs, "*"))
	if len(all) != 6 {
		t.Fatalf("%d entries under %s, want 5 recorded runs and the stray file", len(all), runs)
	}

	code, stdout, stderr := bmx(t, append([]string{"history"}, all...)...)
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

	code, stdout, stderr = bmx(t, append([]string{"publish", "--out", filepath.Join(dir, "site")}, all...)...)
	if code != ExitOK || strings.Count(stderr, "bmx: note: skipped: ") != 1 || !strings.Contains(stdout, "  hist: latest of 4 run(s)") || !strings.Contains(stdout, "  other: latest of 1 run(s)") {
		t.Errorf("publish: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
