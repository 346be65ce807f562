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
			latest := g.reps[slices.IndexFunc(g.dirs, func(d string) bool { return d == h.Runs[len(h.Runs)-1].Dir })]
			if host.Key == "" {
				host = SiteHost{Key: hk, Title: hk, Fingerprint: latest.Run.Host.Summary(), Simulated: latest.Run.Simulated}
			}
			grid, err := w.grid(hk, cfg, h, latest)
			if err != nil {
				return nil, err
			}
			host.Grids = append(host.Grids, grid)
		}
		site.Hosts = append(site.Hosts, host)
	}
	if err := w.page("index.html", "index", map[string]any{"Hosts": site.Hosts, "Runs": len(reps)}); err != nil {
		return nil, err
	}
	return site, nil
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

// grid writes the history page and the evidence pages of one config on one
// host, and returns the grid of its latest run.
func (w *siteWriter) grid(hk, cfg string, h *History, latest *record.Report) (siteGrid, error) {
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
	g := siteGrid{Config: cfg, Run: filepath.Base(h.Runs[len(h.Runs)-1].Dir), Started: run.Started.UTC().Format("2006-01-02 15:04Z"),
		History: histRel, Runs: len(h.Runs), Summary: summary(latest)}
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
			c := siteCell{Verdict: string(r.Verdict), Shown: string(r.Verdict), Href: evRel,
				HistoryHref: histRel + "#" + CellAnchor(r.Cell.ID), Title: r.Cell.ID + ": " + r.Reason}
			if lost[r.Cell.ID] {
				c.Verdict, c.Shown = reports.YardstickLost, string(r.Verdict)+" (yardstick lost)"
				c.Title = r.Cell.ID + ": " + lostText + "; " + r.Reason
			}
			c.Glyph = reports.VerdictGlyph(c.Verdict)
			rows[key].Cells[i] = c
		}
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

// summary counts a run's verdicts: "2 correct, 1 crash".
func summary(rep *record.Report) string {
	counts := rep.Summary()
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
	}
	return strings.Join(parts, ", ")
}

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
