package across

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/record"
	"github.com/bmx-dev/bmx/reports"
)

// Site is a published support matrix: what Publish wrote.
type Site struct {
	// Hosts are the grids, one per host (GPU model and fingerprint).
	Hosts []SiteHost
	// Pages are the files written, relative to the site's root.
	Pages []string
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
// any folder it is copied to.
func Publish(out string, dirs []string, reps []*record.Report) (*Site, error) {
	type group struct {
		dirs []string
		reps []*record.Report
	}
	hosts := map[string]map[string]*group{}
	for i, rep := range reps {
		hk := hostKey(rep.Run)
		if hosts[hk] == nil {
			hosts[hk] = map[string]*group{}
		}
		name := configName(dirs[i], rep)
		g := hosts[hk][name]
		if g == nil {
			g = &group{}
			hosts[hk][name] = g
		}
		g.dirs, g.reps = append(g.dirs, dirs[i]), append(g.reps, rep)
	}
	site := &Site{}
	w := &siteWriter{root: out, site: site}
	for _, hk := range slices.Sorted(maps.Keys(hosts)) {
		var host SiteHost
		for _, cfg := range slices.Sorted(maps.Keys(hosts[hk])) {
			g := hosts[hk][cfg]
			h := NewHistory(g.dirs, g.reps)
			shown, bisect, later := shownRun(h, g.dirs)
			latest := g.reps[slices.Index(g.dirs, shown)]
			if host.Key == "" {
				host = SiteHost{Key: hk, Title: hk, Fingerprint: latest.Run.Host.Summary(), Simulated: latest.Run.Simulated}
			}
			grid, err := w.grid(hk, cfg, h, shown, latest, bisect)
			if err != nil {
				return nil, err
			}
			grid.Later = later
			host.Grids = append(host.Grids, grid)
		}
		site.Hosts = append(site.Hosts, host)
	}
	if err := w.page("index.html", "index", map[string]any{"Hosts": site.Hosts, "Runs": len(reps)}); err != nil {
		return nil, err
	}
	return site, nil
}

// shownRun is the run of a group its grid draws: the latest, but of
// bisects the latest that found something (with its bisect, and what a
// later one that found nothing says: the grid of a bisect is its finding,
// not the values a failed one happened to visit).
func shownRun(h *History, dirs []string) (dir string, b *record.Bisect, later string) {
	dir = h.Runs[len(h.Runs)-1].Dir
	for i := len(h.Runs) - 1; i >= 0; i-- {
		d := h.Runs[i].Dir
		bi, err := record.ReadBisect(d)
		if err != nil {
			return dir, nil, "" // not a bisect's: the latest run
		}
		if bi.Finding != nil {
			if i < len(h.Runs)-1 {
				later = fmt.Sprintf("a later bisect (%s) found nothing: %s", filepath.Base(dir), bisectState(h.Runs[len(h.Runs)-1]))
			}
			return d, bi, later
		}
	}
	return dir, nil, ""
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
func configName(dir string, rep *record.Report) string {
	if b, err := record.ReadBisect(dir); err == nil {
		return fmt.Sprintf("%s: %s by %s", rep.Run.Name, b.Cell, b.Mode)
	}
	return rep.Run.Name
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

func (w *siteWriter) write(rel string, data []byte) error {
	path := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	w.site.Pages = append(w.site.Pages, rel)
	return nil
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
func (w *siteWriter) grid(hk, cfg string, h *History, dir string, latest *record.Report, bisect *record.Bisect) (siteGrid, error) {
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
	for _, r := range latest.Results {
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
func summary(rep *record.Report) string {
	counts := map[string]int{}
	setup := 0
	for i := range rep.Results {
		if !rep.Run.Counts(&rep.Results[i]) {
			setup++
			continue
		}
		counts[string(rep.Results[i].Verdict)]++
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
