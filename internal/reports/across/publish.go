package across

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"html/template"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// Site is a published support matrix: what Publish wrote.
type Site struct {
	// Hosts are the grids, one per host (GPU model and fingerprint).
	Hosts []SiteHost
	// Pages are the files written, relative to the site's root;
	// Unchanged counts the pages whose files already held them.
	Pages     []string
	Unchanged int
}

// SiteHost is one host of the site: its fingerprint and the latest run of
// each config run on it.
type SiteHost struct {
	Key, Title, Fingerprint string
	Simulated               bool
	Grids                   []siteGrid
}

// siteGrid is the latest run of one config on one host, as a grid.
type siteGrid struct {
	Config, Run, Started, History string
	Runs                          int
	Header                        []string
	Rows                          []siteRow
	Summary                       string
	// Judged says the run's cells were judged by an older classifier and
	// re-judged with this bmx's (record.Judged.Sentence); Aborted why the
	// run stopped before its cells had all run.
	Judged, Aborted string
	// Finding is a bisect's finding: the latest run of the group whose
	// bisect found one, drawn instead of a later one that found none
	// (Later says so).
	Finding, Later string
}

type siteRow struct {
	Label string
	Cells []siteCell
}

type siteCell struct {
	// Verdict is the mark the cell is drawn with (its verdict, or
	// reports.YardstickLost), Shown its words.
	Verdict, Shown, Glyph, Href, HistoryHref, Title string
}

// hostKey groups runs by the machine they ran on: its GPU model and name.
func hostKey(run *record.Run) string {
	gpu := run.Host.GPU
	if gpu == "" {
		gpu = "no GPU"
	}
	return gpu + " on " + run.Host.Hostname
}

// slug is a file name for s: its safe characters and a short hash, so two
// names that clean alike stay apart.
func slug(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	clean := strings.Trim(string(b), "-.")
	if len(clean) > 60 {
		clean = clean[:60]
	}
	return fmt.Sprintf("%s-%06x", clean, h.Sum32()&0xffffff)
}

// Publish writes the static site of the runs into out: index.html with one
// grid per host (the latest run of each config on it), an evidence page
// per cell of those runs, and a history page per host and config. Every
// link is relative and nothing is fetched, so the site opens offline from
// any folder it is copied to. A page whose file already holds what it
// would write is left as it is (Site.Unchanged).
func Publish(out string, dirs []string, reps []*record.Report) (*Site, error) {
	return PublishOf(out, summariesOf(dirs, reps))
}

// PublishOf is Publish of the runs' summaries (record.LoadSummary): the
// same site, each evidence page reading its own cell's line of the run.
func PublishOf(out string, sums []*record.Summary) (*Site, error) {
	hosts := map[string]map[string][]*record.Summary{}
	for _, s := range sums {
		hk := hostKey(s.Run)
		if hosts[hk] == nil {
			hosts[hk] = map[string][]*record.Summary{}
		}
		name := configName(s.Dir, s.Run)
		hosts[hk][name] = append(hosts[hk][name], s)
	}
	site := &Site{}
	w := &siteWriter{root: out, site: site}
	if err := w.markSite(); err != nil {
		return nil, err
	}
	for _, hk := range slices.Sorted(maps.Keys(hosts)) {
		var host SiteHost
		for _, cfg := range slices.Sorted(maps.Keys(hosts[hk])) {
			h, err := HistoryOf(hosts[hk][cfg])
			if err != nil {
				return nil, err
			}
			shown, bisect, later := shownRun(h)
			latest := h.sums[shown]
			if host.Key == "" {
				host = SiteHost{Key: hk, Title: hk, Fingerprint: latest.Run.Host.Summary(), Simulated: latest.Run.Simulated}
			}
			grid, err := w.grid(hk, cfg, h, h.Runs[shown].Dir, latest, bisect)
			if err != nil {
				return nil, err
			}
			grid.Later = later
			host.Grids = append(host.Grids, grid)
		}
		site.Hosts = append(site.Hosts, host)
	}
	if err := w.page("index.html", "index", map[string]any{"Hosts": site.Hosts, "Runs": len(sums)}); err != nil {
		return nil, err
	}
	return site, nil
}

// shownRun is the run of a group its grid draws: the latest, but of
// bisects the latest that found something (with its bisect, and what a
// later one that found nothing says: the grid of a bisect is its finding,
// not the values a failed one happened to visit).
func shownRun(h *History) (shown int, b *record.Bisect, later string) {
	shown = len(h.Runs) - 1
	for i := len(h.Runs) - 1; i >= 0; i-- {
		bi, err := record.ReadBisect(h.Runs[i].Dir)
		if err != nil {
			return shown, nil, "" // not a bisect's: the latest run
		}
		if bi.Finding != nil {
			if i < len(h.Runs)-1 {
				later = fmt.Sprintf("a later bisect (%s) found nothing: %s", filepath.Base(h.Runs[shown].Dir), bisectState(h.Runs[len(h.Runs)-1]))
			}
			return i, bi, later
		}
	}
	return shown, nil, ""
}

// bisectState says how a bisect that found nothing ended.
func bisectState(r HistoryRun) string {
	if r.Aborted != "" {
		return r.Aborted
	}
	return "it ended with no finding"
}

// findingText says a bisect's finding in a line, as bmx bisect does.
func findingText(b *record.Bisect) string {
	f := b.Finding
	by := "a verdict change"
	if b.Mode == record.BisectPerf {
		by = "a performance drop"
	}
	if len(f.Candidates) > 0 {
		return fmt.Sprintf("bisect on %s: first bad one of %s=%s (skipped values between): %s", by, b.Along, strings.Join(f.Candidates, ","), f.Text)
	}
	return fmt.Sprintf("bisect on %s: first bad %s=%s (last good: %s): %s", by, b.Along, f.FirstBad, f.LastGood, f.Text)
}

// configName names the grid a run belongs to: its config's name, and for
// a bisect the cell and mode too, so bisects of two cells are two grids.
func configName(dir string, run *record.Run) string {
	if b, err := record.ReadBisect(dir); err == nil {
		return fmt.Sprintf("%s: %s by %s", run.Name, b.Cell, b.Mode)
	}
	return run.Name
}

// siteWriter writes the site's pages.
type siteWriter struct {
	root string
	site *Site
	tmpl *template.Template
}

// page renders the named template into rel.
func (w *siteWriter) page(rel, name string, data any) error {
	if w.tmpl == nil {
		t, err := template.New("site").Funcs(template.FuncMap{"anchor": CellAnchor}).ParseFS(templateFS, "templates/site.html.tmpl", "templates/style.tmpl")
		if err != nil {
			return err
		}
		w.tmpl = t
	}
	var buf bytes.Buffer
	if err := w.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	return w.write(rel, buf.Bytes())
}

// write writes a page, unless its file already holds data: publishing
// one more night rewrites the pages that changed (the new run's, the
// index, the histories), not the whole site.
func (w *siteWriter) write(rel string, data []byte) error {
	path := filepath.Join(w.root, filepath.FromSlash(rel))
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		w.site.Unchanged++
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	w.site.Pages = append(w.site.Pages, rel)
	return nil
}

// SiteMarker is the file that marks a folder as a site bmx publish wrote:
// publish writes into a folder that is empty, missing or marked so, and
// into no other (someone's index.html is not a page of bmx's to replace).
const SiteMarker = ".bmx-site"

// legacyMark is what index.html of a site published before SiteMarker
// existed says at its end.
const legacyMark = "Written by bmx publish"

// IsSite says whether the folder dir is empty, missing, or a site bmx
// publish wrote (SiteMarker, or an index.html of an earlier bmx's).
func IsSite(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(filepath.Join(dir, SiteMarker)); err == nil {
		return true, nil
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	return err == nil && bytes.Contains(index, []byte(legacyMark)), nil
}

// markSite writes the SiteMarker of the site.
func (w *siteWriter) markSite() error {
	path := filepath.Join(w.root, SiteMarker)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte("a site written by bmx publish: bmx publish --out writes into this folder\n"), 0o644)
}

// perfBadCells are the cells a perf bisect judged on its bad side (slower),
// with why: its steps are all correct, so the side is what it found.
func perfBadCells(bisect *record.Bisect) map[string]string {
	perfBad := map[string]string{}
	if bisect == nil || bisect.Mode != record.BisectPerf {
		return perfBad
	}
	for _, st := range bisect.Steps {
		if st.Side == record.SideBad {
			perfBad[st.Cell] = st.Why
		} else {
			delete(perfBad, st.Cell)
		}
	}
	return perfBad
}

// gridCell is the latest run's result r as the support matrix shows it:
// its verdict, or yardstick lost, a setup's crash not counted, or the
// slower side of a perf bisect.
func gridCell(run *record.Run, r record.Result, evRel, histRel string, lost bool, perfBad map[string]string) siteCell {
	c := siteCell{Verdict: string(r.Verdict), Shown: string(r.Verdict), Href: evRel,
		HistoryHref: histRel + "#" + CellAnchor(r.Cell.ID), Title: r.Cell.ID + ": " + r.Reason}
	if lost {
		c.Verdict, c.Shown = reports.YardstickLost, string(r.Verdict)+" (yardstick lost)"
		c.Title = r.Cell.ID + ": " + lostText + "; " + r.Reason
	}
	c.Glyph = reports.VerdictGlyph(c.Verdict)
	if !run.Counts(&r) {
		c.Verdict, c.Glyph, c.Shown = "none", reports.VerdictGlyph("none"), string(r.Verdict)+" of the setup: not counted"
		c.Title = r.Cell.ID + ": the run " + run.Aborted() + "; " + r.Reason
	}
	if why, ok := perfBad[r.Cell.ID]; ok {
		c.Verdict, c.Glyph, c.Shown = perfBadMark, "↓", string(r.Verdict)+", slower: bad side of the bisect"
		c.Title = r.Cell.ID + ": " + why
	}
	return c
}

// grid writes the history page and the evidence pages of one config on one
// host, and returns the grid of its latest run.
func (w *siteWriter) grid(hk, cfg string, h *History, dir string, latest *record.Summary, bisect *record.Bisect) (siteGrid, error) {
	histRel := "history/" + slug(hk+"/"+cfg) + ".html"
	var buf bytes.Buffer
	if err := RenderHistory(&buf, h, "html"); err != nil {
		return siteGrid{}, err
	}
	page := strings.Replace(buf.String(), "<body>", `<body><p><a href="../index.html">← the support matrix</a></p>`, 1)
	if err := w.write(histRel, []byte(page)); err != nil {
		return siteGrid{}, err
	}
	run := latest.Run
	g := siteGrid{Config: cfg, Run: filepath.Base(dir), Started: run.Started.UTC().Format("2006-01-02 15:04Z"),
		History: histRel, Runs: len(h.Runs), Summary: summary(latest), Judged: latest.JudgedNote, Aborted: run.Aborted()}
	perfBad := perfBadCells(bisect)
	if bisect != nil {
		g.Finding = findingText(bisect)
	}
	axes := run.Axes
	if len(axes) == 0 {
		return g, nil
	}
	last := axes[len(axes)-1]
	g.Header = append([]string{axisNames(axes[:len(axes)-1])}, last.Values...)
	lost := map[string]bool{} // the latest run's cells whose correct is no fix
	for _, c := range h.Cells {
		if n := len(c.Points); n > 0 && c.Points[n-1].YardstickLost {
			lost[c.Cell] = true
		}
	}
	rows := map[string]*siteRow{}
	var order []string
	for i := range latest.Cells {
		r, err := latest.Result(i) // its evidence, read for this cell only
		if err != nil {
			return siteGrid{}, err
		}
		var label []string
		col := ""
		for _, av := range r.Cell.Values {
			if av.Axis == last.Name {
				col = av.Value
			} else {
				label = append(label, av.Value)
			}
		}
		key := strings.Join(label, ", ")
		if rows[key] == nil {
			rows[key] = &siteRow{Label: cmp.Or(key, last.Name), Cells: make([]siteCell, len(last.Values))}
			order = append(order, key)
		}
		evRel := "cells/" + slug(hk+"/"+cfg) + "/" + slug(r.Cell.ID) + ".html"
		if err := w.evidence(evRel, hk, g, histRel, r, lost[r.Cell.ID]); err != nil {
			return siteGrid{}, err
		}
		if i := slices.Index(last.Values, col); i >= 0 {
			rows[key].Cells[i] = gridCell(run, r, evRel, histRel, lost[r.Cell.ID], perfBad)
		}
	}
	if n := len(perfBad); n > 0 {
		g.Summary += fmt.Sprintf(" (%d slower: the bad side of the bisect)", n)
	}
	for _, k := range order {
		for i := range rows[k].Cells {
			if rows[k].Cells[i].Verdict == "" {
				rows[k].Cells[i] = siteCell{Verdict: "none", Glyph: reports.VerdictGlyph("none")}
			}
		}
		g.Rows = append(g.Rows, *rows[k])
	}
	return g, nil
}

func axisNames(axes []record.AxisValues) string {
	var names []string
	for _, a := range axes {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// summary counts a run's verdicts: "2 correct, 1 crash"; the crashes of a
// broken setup are no verdicts (record.Run.Counts) and are counted apart.
func summary(s *record.Summary) string {
	counts := map[string]int{}
	setup := 0
	for i := range s.Cells {
		if !s.Cells[i].Counts {
			setup++
			continue
		}
		counts[string(s.Cells[i].Verdict)]++
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
	}
	if setup > 0 {
		parts = append(parts, fmt.Sprintf("%d crashed on the broken setup (not counted)", setup))
	}
	return strings.Join(parts, ", ")
}

// perfBadMark is the mark of a perf bisect's step on the bad side: its
// verdict is correct, what the bisect found is that it is slower.
const perfBadMark = "perf-bad"

// lostText says why a cell's correct is drawn as no fix.
const lostText = "yardstick lost: it failed in the run before only against that run's yardstick, and this run had none to judge it by, so nothing shows it fixed"

// evidence writes a cell's evidence page: its verdict and what decided
// it, each probe's verdict, the end of its log and how to run it again;
// lost marks a correct verdict that is no fix (reports.YardstickLost).
func (w *siteWriter) evidence(rel, hk string, g siteGrid, histRel string, r record.Result, lost bool) error {
	mark, lostWhy := string(r.Verdict), ""
	if lost {
		mark, lostWhy = reports.YardstickLost, lostText
	}
	return w.page(rel, "evidence", map[string]any{
		"R": r, "Host": hk, "Config": g.Config, "Run": g.Run, "Started": g.Started, "Mark": mark, "Lost": lostWhy,
		"Glyph": reports.VerdictGlyph(mark), "History": "../../" + histRel + "#" + CellAnchor(r.Cell.ID),
		"Index": "../../index.html",
	})
}
