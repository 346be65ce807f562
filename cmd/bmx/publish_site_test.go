package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/browsertest"
)

// TestPublish sweeps two simulated hosts (each with an nvidia-smi of its
// own GPU) at a few versions through real bmx processes, publishes every
// run as one site, and checks it: one grid per host, the latest run's
// verdicts, every link of every page resolving to a file and an element
// of it, and, in headless Chromium at 390 and 1280 px, no element leaving
// the page.
func TestPublish(t *testing.T) {
	t.Parallel()
	browser := browsertest.Find(t)
	dir := t.TempDir()
	hosts := []struct {
		name, gpu string
		versions  []int
	}{
		{"a", "NVIDIA H200 (simulated host A)", []int{1, 6, 8}},
		{"b", "NVIDIA RTX PRO 6000 Blackwell (simulated host B)", []int{2, 10}},
	}
	hostRuns := make([][]string, len(hosts))
	t.Run("sweeps", func(t *testing.T) { // the two hosts at once
		for i, host := range hosts {
			t.Run(host.name, func(t *testing.T) {
				t.Parallel()
				cfg := acrossConfig(t, filepath.Join(dir, host.name), "pub", host.gpu)
				hostRuns[i] = sweepVersions(t, cfg, filepath.Join(dir, host.name, "runs"), host.versions)
			})
		}
	})
	if t.Failed() {
		return
	}
	runs := slices.Concat(hostRuns...)
	site := filepath.Join(dir, "site")
	code, stdout, stderr := runBMX(t, append([]string{"publish", "--out", site}, runs...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	index := string(mustRead(t, filepath.Join(site, "index.html")))
	for _, want := range []string{"NVIDIA H200 (simulated host A)", "NVIDIA RTX PRO 6000 Blackwell (simulated host B)", "latest of 3 run(s)", "latest of 2 run(s)", "↯ crash", "✓ correct"} {
		if !strings.Contains(index, want) {
			t.Errorf("index.html does not show %q", want)
		}
	}
	pages := checkSiteLinks(t, site)
	if len(pages) < 9 { // index, 2 histories, 6 evidence pages
		t.Fatalf("%d pages: %v", len(pages), pages)
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
		for _, m := range idRe.FindAllStringSubmatch(string(mustRead(t, filepath.Join(site, p))), -1) {
			ids[p][m[1]] = true
		}
	}
	for _, p := range pages {
		for _, m := range hrefRe.FindAllStringSubmatch(string(mustRead(t, filepath.Join(site, p))), -1) {
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
