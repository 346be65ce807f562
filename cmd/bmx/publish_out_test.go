package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// writeNamedRun makes the run directory dir of the config name, started
// on day, with the verdicts of cells moe=a, moe=b and moe=c, as this bmx
// records them.
func writeNamedRun(t *testing.T, dir, name string, day int, verdicts ...classify.Verdict) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	run := &record.Run{Name: name, BMXVersion: "test", Started: time.Date(2026, 3, day, 2, 0, 0, 0, time.UTC),
		Axes: []record.AxisValues{{Name: "moe", Values: []string{"a", "b", "c"}}},
		Host: record.Host{Hostname: "gpu", GPU: "NVIDIA RTX PRO 6000", Versions: map[string]string{"torch": "2.12.0.dev202603" + string(rune('0'+day/10)) + string(rune('0'+day%10))}}}
	if err := record.WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	var rs []record.Result
	for i, v := range verdicts {
		moe := run.Axes[0].Values[i]
		rs = append(rs, record.Result{Cell: matrix.Cell{ID: "moe=" + moe, Values: []matrix.AxisValue{{Axis: "moe", Value: moe}}},
			Verdict: v, Reason: "because", Classifier: classify.Fingerprint(), LogTail: "the end of " + moe + "'s log\n"})
	}
	if err := record.WriteResults(filepath.Join(dir, record.ResultsFile), rs); err != nil {
		t.Fatal(err)
	}
}

// TestPublishOutRefusesForeignFolder: publish --out a folder that holds
// someone else's files (their index.html) is refused in one line and the
// folder left as it was, unless --force; an empty folder, a missing one, a
// site bmx published (its marker) and a site an earlier bmx published (its
// index.html, before the marker) are written into. The refusal is a bmx
// process's; the publishes that write run in this process.
func TestPublishOutRefusesForeignFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "runs", "1")
	writeNamedRun(t, runDir, "nightly", 1, classify.Correct, classify.Crash, classify.Garbage)
	theirs := filepath.Join(dir, "theirs")
	os.MkdirAll(theirs, 0o755)
	mine := []byte("<html>my own home page</html>\n")
	os.WriteFile(filepath.Join(theirs, "index.html"), mine, 0o644)

	code, stdout, stderr := runBMX(t, "publish", runDir, "--out", theirs)
	if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "not empty and not a site bmx publish wrote") || !strings.Contains(stderr, "--force") {
		t.Errorf("publish into a folder of someone else's: exit %d, stderr %q (want %d and one line naming --force)", code, stderr, ExitUsage)
	}
	if got, _ := os.ReadFile(filepath.Join(theirs, "index.html")); string(got) != string(mine) || stdout != "" {
		t.Errorf("their index.html became %.200q; stdout %q", got, stdout)
	}
	if code, _, stderr := bmx(t, "publish", runDir, "--out", theirs, "--force"); code != ExitOK {
		t.Errorf("--force: exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(theirs, "index.html")); !strings.Contains(string(got), "Written by bmx publish") {
		t.Errorf("--force did not publish: %.200q", got)
	}

	legacy := filepath.Join(dir, "legacy")
	os.MkdirAll(legacy, 0o755)
	os.WriteFile(filepath.Join(legacy, "index.html"), []byte("<p class=\"muted\">Written by bmx publish from the runs' own records</p>"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	for _, out := range []string{empty, filepath.Join(dir, "missing"), theirs, legacy} {
		if code, _, stderr := bmx(t, "publish", runDir, "--out", out); code != ExitOK {
			t.Errorf("publish --out %s: exit %d: %s", filepath.Base(out), code, stderr)
		}
		if _, err := os.Stat(filepath.Join(out, ".bmx-site")); err != nil {
			t.Errorf("%s: no marker: %v", filepath.Base(out), err)
		}
	}
}

// TestPublishRewritesOnlyChanged: publishing again writes no page, and
// publishing one more night of one config writes that config's pages and
// the index, not the other config's, and says how many it wrote.
func TestPublishRewritesOnlyChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := []string{filepath.Join(dir, "runs", "n1"), filepath.Join(dir, "runs", "n2"), filepath.Join(dir, "runs", "w1")}
	writeNamedRun(t, runs[0], "nightly", 1, classify.Correct, classify.Crash, classify.Garbage)
	writeNamedRun(t, runs[1], "nightly", 2, classify.Correct, classify.Correct, classify.Garbage)
	writeNamedRun(t, runs[2], "weekly", 1, classify.Correct, classify.NaN, classify.Crash)
	site := filepath.Join(dir, "site")
	publish := func() string {
		t.Helper()
		code, stdout, stderr := runBMX(t, append([]string{"publish", "--out", site}, runs...)...)
		if code != ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		return stdout
	}
	// index, two histories, three evidence pages each
	if out := publish(); !strings.Contains(out, "wrote 9 pages (0 unchanged)") {
		t.Errorf("first publish: %s", out)
	}
	weekly, _ := filepath.Glob(filepath.Join(site, "cells", "*weekly*", "*.html"))
	if len(weekly) != 3 {
		t.Fatalf("weekly's evidence pages: %v", weekly)
	}
	old := time.Now().Add(-time.Hour)
	for _, p := range weekly {
		os.Chtimes(p, old, old)
	}
	if out := publish(); !strings.Contains(out, "wrote 0 pages (9 unchanged)") {
		t.Errorf("the same runs again: %s", out)
	}
	runs = append(runs, filepath.Join(dir, "runs", "n3"))
	writeNamedRun(t, runs[3], "nightly", 3, classify.Crash, classify.Correct, classify.Garbage)
	// index, nightly's history, its three evidence pages (the new run's)
	if out := publish(); !strings.Contains(out, "wrote 5 pages (4 unchanged)") {
		t.Errorf("one more night: %s", out)
	}
	for _, p := range weekly {
		if fi, err := os.Stat(p); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("%s was written again", p)
		}
	}
}

// TestSweepLeavesSummary: a sweep (a real bmx process) leaves the summary
// history and publish read its run through, and they read it as it is:
// neither makes it again.
func TestSweepLeavesSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := acrossConfig(t, dir, "summ", "")
	runs := sweepVersions(t, cfg, filepath.Join(dir, "runs"), []int{1, 2})
	var made [][]byte
	var files []os.FileInfo
	for _, r := range runs {
		b, err := os.ReadFile(filepath.Join(r, record.SummaryFile))
		if err != nil {
			t.Fatalf("the sweep left no summary: %v", err)
		}
		made = append(made, b)
		// The file itself, not only its bytes: a summary made again within
		// record's racy window of the sweep holds the same bytes.
		fi, err := os.Stat(filepath.Join(r, record.SummaryFile))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fi)
	}
	if code, _, stderr := runBMX(t, append([]string{"history", "--format", "md"}, runs...)...); code != ExitOK {
		t.Fatalf("history: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runBMX(t, append([]string{"publish", "--out", filepath.Join(dir, "site")}, runs...)...); code != ExitOK {
		t.Fatalf("publish: exit %d: %s", code, stderr)
	}
	for i, r := range runs {
		if b, _ := os.ReadFile(filepath.Join(r, record.SummaryFile)); string(b) != string(made[i]) {
			t.Errorf("%s: its summary was made again", filepath.Base(r))
		}
		if fi, err := os.Stat(filepath.Join(r, record.SummaryFile)); err != nil || !os.SameFile(fi, files[i]) || !fi.ModTime().Equal(files[i].ModTime()) {
			t.Errorf("%s: its summary was written again (%v)", filepath.Base(r), err)
		}
	}
}
