package reports

import (
	_ "embed"
	"html/template"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/bmx-dev/bmx/classify"
)

//go:embed templates/report.html.tmpl
var htmlTemplate string

var reportHTML = template.Must(template.New("report").Funcs(template.FuncMap{
	// verdictClass styles correct* as correct.
	// A predicted cell, "(crash)", is hatched.
	"verdictClass": func(v string) string {
		if isPredictedShown(v) {
			return string(classify.Predicted)
		}
		return strings.TrimSuffix(v, ShapeOnlyMark)
	},
	"add": func(a, b int) int { return a + b },
}).Parse(htmlTemplate))

// htmlLogLines is how much of a cell's log the HTML report shows.
const htmlLogLines = 40

type htmlData struct {
	Name, Summary, ProbeSet, Started, Ended, ReferenceProblem, Version, DegradedLegend, ShapeOnlyLegend, PredictedLegend string
	Blame                                                                                                                []string
	Simulated                                                                                                            bool
	Host                                                                                                                 Host
	Versions                                                                                                             []htmlKV
	Grid                                                                                                                 *htmlGrid
	Legend                                                                                                               []string
	Causes                                                                                                               []Cluster
	Cells                                                                                                                []htmlCell
	Perf                                                                                                                 *htmlPerf
}

// htmlPerf is the performance section.
type htmlPerf struct {
	Caption        string
	Header         []string
	Lines          []perfLine
	Problems       []string
	Recommendation []recLine
	Chart          *htmlChart
}

type htmlKV struct{ Name, Value string }

type htmlGrid struct {
	Corner string
	Cols   []string
	Rows   []htmlRow
}

type htmlRow struct {
	Name  string
	Cells []string
}

type htmlCell struct {
	ID, Anchor, Verdict, Reason, Signature, Evidence, Known, SameAs, Repro, Log string
	Problems                                                                    []string
	Probes                                                                      []htmlProbe
	Numerics                                                                    *htmlNumerics
}

type htmlNumerics struct {
	Reference, Summary string
	Probes             []htmlNumericsProbe
}

type htmlNumericsProbe struct {
	Name, FirstDiff, KL string
	Compared            int
}

type htmlProbe struct {
	Name, Verdict, Reason, Text string
}

// HTML renders one standalone page: inline CSS, no scripts or fetches, the
// grid coloured by verdict with a legend, the host fingerprint, the causes,
// and each cell's evidence (answers, log tail, command) in a section that
// expands. html/template escapes every string from a server; ANSI escapes
// and control characters are removed first.
func HTML(w io.Writer, rep *Report) error {
	d := htmlData{
		Name: Clean(rep.Run.Name), Summary: rep.SummaryLine(), ProbeSet: Clean(rep.Run.ProbeSet), Simulated: rep.Run.Simulated,
		Started: rep.Run.Started.UTC().Format("2006-01-02 15:04 UTC"), ReferenceProblem: Clean(rep.ReferenceProblem()),
		Version: Clean(rep.Run.BMXVersion), Host: cleanHost(rep.Run.Host), Causes: rep.Clusters(),
		DegradedLegend:  rep.degradedLegend(),
		ShapeOnlyLegend: rep.ShapeOnlyLegend(),
		PredictedLegend: rep.PredictedLegend(),
	}
	if !rep.Run.Ended.IsZero() {
		d.Ended = rep.Run.Ended.UTC().Format("2006-01-02 15:04 UTC")
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Run.Host.Versions)) {
		d.Versions = append(d.Versions, htmlKV{Clean(k), Clean(rep.Run.Host.Versions[k])})
	}
	if g, ok := rep.grid(); ok {
		hg := &htmlGrid{Corner: Clean(g.rowAxis + ` \ ` + g.colAxis)}
		for _, c := range g.cols {
			hg.Cols = append(hg.Cols, Clean(c))
		}
		for _, row := range g.rows {
			hr := htmlRow{Name: Clean(row)}
			for _, col := range g.cols {
				v := g.at(row, col)
				if v == "-" {
					v = "none"
				}
				hr.Cells = append(hr.Cells, v)
			}
			hg.Rows = append(hg.Rows, hr)
		}
		d.Grid = hg
	}
	for _, v := range append(slices.Clone(classify.Verdicts), classify.Skipped, classify.Excluded) {
		d.Legend = append(d.Legend, string(v))
	}
	for i := range d.Causes {
		d.Causes[i].Signature = Clean(d.Causes[i].Signature)
	}
	if perf := rep.Performance(); perf != nil {
		hp := &htmlPerf{Caption: capitalize(perf.caption()), Header: perfHeader, Chart: perfChart(perf)}
		for _, l := range perf.lines() {
			l.Cell = Clean(l.Cell)
			hp.Lines = append(hp.Lines, l)
		}
		hp.Problems = cleanAll(perf.problemLines())
		for _, l := range perf.rec {
			hp.Recommendation = append(hp.Recommendation, recLine{Text: Clean(capitalize(l.Text)), Flags: Clean(l.Flags)})
		}
		d.Perf = hp
	}
	same := rep.SameAs()
	for _, r := range rep.Results {
		c := htmlCell{
			ID: Clean(r.Cell.ID), Anchor: anchorRe.ReplaceAllString(r.Cell.ID, "_"), Verdict: r.Shown(),
			Reason: Clean(r.Reason), Signature: Clean(r.Signature), Evidence: cleanLines(r.Evidence),
			Known: Clean(rep.statusText(r)), SameAs: Clean(same[r.Cell.ID]), Repro: Clean(r.Repro), Log: cleanLines(lastLines(r.LogTail, htmlLogLines)),
		}
		for _, p := range r.Problems {
			c.Problems = append(c.Problems, Clean(p))
		}
		if n := r.Numerics; n != nil {
			c.Numerics = &htmlNumerics{Reference: Clean(n.Reference), Summary: numericsSummary(n)}
			for _, p := range n.Probes {
				c.Numerics.Probes = append(c.Numerics.Probes, htmlNumericsProbe{Name: Clean(probeLabel(p)), FirstDiff: firstDiffText(p.FirstDiff), KL: formatKL(p.KL), Compared: p.Compared})
			}
		}
		for _, p := range r.Probes {
			hp := htmlProbe{Name: Clean(p.Name), Verdict: string(p.Verdict), Reason: Clean(p.Reason)}
			for _, o := range r.Observations {
				if o.Probe == p.Name {
					hp.Text = cleanLines(clip(o.Text, 1000))
					break
				}
			}
			c.Probes = append(c.Probes, hp)
		}
		d.Cells = append(d.Cells, c)
	}
	return reportHTML.Execute(w, d)
}

var anchorRe = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// cleanLines is Clean that keeps line breaks, for text shown in <pre>.
func cleanLines(s string) string {
	s = ansiRe.ReplaceAllString(strings.ToValidUTF8(s, "\uFFFD"), "")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func cleanHost(h Host) Host {
	h.Hostname, h.OS, h.Arch, h.Driver, h.CUDA = Clean(h.Hostname), Clean(h.OS), Clean(h.Arch), Clean(h.Driver), Clean(h.CUDA)
	h.GPUs = slices.Clone(h.GPUs)
	for i := range h.GPUs {
		h.GPUs[i].Name, h.GPUs[i].ComputeCap = Clean(h.GPUs[i].Name), Clean(h.GPUs[i].ComputeCap)
	}
	var notes []string
	for _, n := range h.Notes {
		notes = append(notes, Clean(n))
	}
	h.Notes = notes
	return h
}

func cleanAllLines(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = Clean(l)
	}
	return out
}
