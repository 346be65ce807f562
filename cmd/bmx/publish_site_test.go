package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
)

// TestPublish runs bmx publish as a process on two tiny runs of one
// config: it exits 0, says the grid it drew and the pages it wrote, and
// leaves a marked site with an index (5 pages: it, the history, 3 cells'
// evidence). What the pages hold (grids per host, evidence and history
// pages, every link, the layout in a browser) is reports/across's
// TestPublishSite, on recorded runs of real sweeps.
func TestPublish(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := filepath.Join(dir, "runs", "1"), filepath.Join(dir, "runs", "2")
	writeNamedRun(t, first, "nightly", 1, classify.Correct, classify.Correct, classify.Correct)
	writeNamedRun(t, second, "nightly", 2, classify.Correct, classify.Crash, classify.Correct)
	site := filepath.Join(dir, "site")
	code, stdout, stderr := runBMX(t, "publish", "--out", site, first, second)
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"NVIDIA RTX PRO 6000 on gpu:\n", "  nightly: latest of 2 run(s) 2: 2 correct, 1 crash\n", "wrote 5 pages (0 unchanged); open " + filepath.Join(site, "index.html")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"index.html", ".bmx-site"} {
		if _, err := os.Stat(filepath.Join(site, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestPublishFlags: --out is required; a directory that is not a run is
// one line naming it; both exit 2.
func TestPublishFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", t.TempDir()}, "--out: required"},
		{[]string{"publish", "--out", t.TempDir(), t.TempDir()}, "is not a bmx run directory"},
	} {
		code, _, stderr := bmx(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}
