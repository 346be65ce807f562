package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishBisects runs bmx publish on the bisects reports/across records
// from real bmx bisects of the built-in host (a verdict bisect that finds
// the crash from version 6, a later one of the same cell that finds
// nothing, a perf bisect): its lines draw the first bisect's finding, name
// the later one that found nothing, and say what the perf bisect found
// (its bad side slower), not all green. What the site holds is
// reports/across's TestPublishBisects, on the same runs.
func TestPublishBisects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// A copy: loading a run writes its summary beside it.
	if err := os.CopyFS(runs, os.DirFS(filepath.Join("..", "..", "internal", "reports", "across", "testdata", "bisects"))); err != nil {
		t.Fatal(err)
	}
	all, _ := filepath.Glob(filepath.Join(runs, "*"))
	site := filepath.Join(dir, "site")
	code, stdout, stderr := bmx(t, append([]string{"publish", "--out", site}, all...)...)
	if code != ExitOK || len(all) != 3 {
		t.Fatalf("publish of %d bisects: exit %d\n%s", len(all), code, stderr)
	}
	for _, want := range []string{
		"by verdict: of 2 run(s), the latest with a finding",
		"bisect on a verdict change: first bad sim_version=6 (last good: 5): crash",
		"found nothing: it ended with no finding",
		"(2 slower: the bad side of the bisect)",
		"bisect on a performance drop: first bad sim_version=5 (last good: 4)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("publish does not say %q:\n%s", want, stdout)
		}
	}
	index, err := os.ReadFile(filepath.Join(site, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), `class="v v-perf-bad"`) || !strings.Contains(string(index), "first bad sim_version=6") {
		t.Errorf("index.html lacks the perf bisect's slower steps or the verdict bisect's finding")
	}
}
