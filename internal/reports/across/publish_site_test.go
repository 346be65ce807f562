package across

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/browsertest"
	"github.com/bmx-dev/bmx/internal/record"
)

// update regenerates the recorded runs of testdata/ from real sweeps of
// the simulated host (publishRuns: go test ./internal/reports/across -run
// TestPublishSite -update), instead of reading the committed ones.
var update = flag.Bool("update", false, "sweep the simulated hosts with a real bmx again and rewrite the recorded runs under testdata/")

// publishRunsDir holds the recorded runs TestPublishSite publishes: one
// folder per simulated host, one run directory per sweep of it.
var publishRunsDir = filepath.Join("testdata", "publish")

// TestPublishSite publishes the recorded runs of two simulated hosts (each
// with an nvidia-smi of its own GPU, swept at a few versions: host A at 1,
// 6 and 8, host B at 2 and 10; made by publishRuns with -update) as one
// site, and checks it: one grid per host, the latest run's verdicts, every
// link of every page resolving to a file and an element of it, and, in
// headless Chromium at 390 and 1280 px, no element leaving the page.
func TestPublishSite(t *testing.T) {
	t.Parallel()
	if *update {
		publishRuns(t, publishRunsDir)
	}
	browser := browsertest.Find(t)
	dir := t.TempDir()
	// A copy: loading a run writes its summary beside it, and the
	// committed runs stay as the sweeps left them.
	if err := os.CopyFS(filepath.Join(dir, "runs"), os.DirFS(publishRunsDir)); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", "*"))
	if len(runs) != 5 {
		t.Fatalf("%d recorded runs under %s, want 5 (go test ./internal/reports/across -run TestPublishSite -update makes them)", len(runs), publishRunsDir)
	}
	var sums []*record.Summary
	for _, r := range runs {
		s, err := record.LoadSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	site := filepath.Join(dir, "site")
	s, err := PublishOf(site, sums)
	if err != nil {
		t.Fatal(err)
	}
	var grids []string
	for _, h := range s.Hosts {
		for _, g := range h.Grids {
			grids = append(grids, fmt.Sprintf("%s: %s: latest of %d: %s", h.Title, g.Config, g.Runs, g.Summary))
		}
	}
	want := []string{
		"NVIDIA H200 (simulated host A) on " + sums[0].Run.Host.Hostname + ": pub: latest of 3: 2 correct, 1 crash",
		"NVIDIA RTX PRO 6000 Blackwell (simulated host B) on " + sums[0].Run.Host.Hostname + ": pub: latest of 2: 2 correct, 1 crash",
	}
	if !slices.Equal(grids, want) {
		t.Errorf("grids:\n%s\nwant:\n%s", strings.Join(grids, "\n"), strings.Join(want, "\n"))
	}
	index := string(readSite(t, filepath.Join(site, "index.html")))
	for _, want := range []string{"NVIDIA H200 (simulated host A)", "NVIDIA RTX PRO 6000 Blackwell (simulated host B)", "latest of 3 run(s)", "latest of 2 run(s)", "↯ crash", "✓ correct"} {
		if !strings.Contains(index, want) {
			t.Errorf("index.html does not show %q", want)
		}
	}
	pages := checkSiteLinks(t, site)
	var histories, evidence int
	for _, p := range pages {
		histories += b2i(strings.HasPrefix(p, "history/"))
		evidence += b2i(strings.HasPrefix(p, "cells/"))
	}
	if len(pages) != 9 || histories != 2 || evidence != 6 {
		t.Fatalf("%d pages (%d histories, %d evidence), want index, 2 histories, 6 evidence pages: %v", len(pages), histories, evidence, pages)
	}
	var bp []browsertest.Page
	for _, p := range pages {
		bp = append(bp, browsertest.Page{Name: p, Path: filepath.Join(site, p)})
	}
	for _, l := range browsertest.LayOut(t, browser, t.TempDir(), bp, []int{390, 1280}) {
		for _, p := range l.Problems() {
			t.Error(p)
		}
		if l.Page == "index.html" && l.Links < 12 {
			t.Errorf("index.html at %d px: %d links, want a cell's and its history's for each of 6 cells", l.Width, l.Links)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func readSite(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hrefRe and idRe find a page's links and element ids.
var (
	hrefRe = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	idRe   = regexp.MustCompile(`id="([^"]*)"`)
)

// checkSiteLinks checks every link of every page of the site: relative, to
// a file of the site, and to an element of it when it names one. It
// returns the pages, relative to the site.
func checkSiteLinks(t *testing.T, site string) []string {
	t.Helper()
	var pages []string
	filepath.WalkDir(site, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".html") {
			rel, _ := filepath.Rel(site, path)
			pages = append(pages, filepath.ToSlash(rel))
		}
		return err
	})
	ids := map[string]map[string]bool{}
	for _, p := range pages {
		ids[p] = map[string]bool{}
		for _, m := range idRe.FindAllStringSubmatch(string(readSite(t, filepath.Join(site, p))), -1) {
			ids[p][m[1]] = true
		}
	}
	for _, p := range pages {
		for _, m := range hrefRe.FindAllStringSubmatch(string(readSite(t, filepath.Join(site, p))), -1) {
			link := strings.ReplaceAll(m[1], "&amp;", "&")
			u, err := url.Parse(link)
			if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(u.Path, "/") {
				t.Errorf("%s: link %q is not relative to the site", p, link)
				continue
			}
			target := p
			if u.Path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p), u.Path)))
			}
			if _, ok := ids[target]; !ok {
				t.Errorf("%s: link %q: no page %s", p, link, target)
				continue
			}
			if u.Fragment != "" && !ids[target][u.Fragment] {
				t.Errorf("%s: link %q: %s has no element %q", p, link, target, u.Fragment)
			}
		}
	}
	return pages
}
