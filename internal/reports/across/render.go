package across

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bmx-dev/bmx/internal/reports"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

// HistoryFormats are the formats RenderHistory writes.
var HistoryFormats = []string{"table", "md", "json", "html"}

// RenderHistory writes one history in format (one of HistoryFormats).
func RenderHistory(w io.Writer, h *History, format string) error {
	return RenderHistories(w, []*History{h}, format)
}

// RenderHistories writes the histories of Histories' groups in format (one
// of HistoryFormats), each under its title: one after the other in the
// terminal and Markdown, a JSON array, sections of one HTML page.
func RenderHistories(w io.Writer, hs []*History, format string) error {
	switch format {
	case "table", "md":
		for i, h := range hs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			var err error
			if format == "table" {
				err = historyTable(w, h)
			} else {
				err = historyMarkdown(w, h)
			}
			if err != nil {
				return err
			}
		}
		return nil
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if hs == nil {
			hs = []*History{}
		}
		return enc.Encode(hs)
	case "html":
		return historyHTML(w, hs)
	}
	return fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(HistoryFormats, ", "))
}

// historyTable is the terminal view: one line per cell (its strip, its
// latest verdict, a note), then the changes and the speeds, one line per
// cell that has one, so no line is as wide as all of it.
func historyTable(w io.Writer, h *History) error {
	fmt.Fprintf(w, "== %s ==\nhistory of %d cells over %d runs, oldest first (one glyph per run: %s)\n\n", h.Title, len(h.Cells), len(h.Runs), legend())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tverdicts\tlatest\tnote")
	for _, c := range h.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Cell, c.Strip, c.Latest, c.note())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nlast changes:")
	changed := 0
	for _, c := range h.Cells {
		if c.LastChange != nil {
			fmt.Fprintf(w, "  %s: %s\n", c.Cell, h.changeText(c))
			changed++
		}
	}
	if changed == 0 {
		fmt.Fprintln(w, "  none: every cell kept its verdict")
	}
	fmt.Fprintln(w, "\nperformance (tok/s per request at concurrency 1, first -> latest, the latest's spread; TTFT median):")
	for _, c := range h.Cells {
		if t := h.perfText(c); t != "not measured" {
			fmt.Fprintf(w, "  %s: %s\n", c.Cell, t)
		}
	}
	fmt.Fprintln(w, "\nruns:")
	for i, r := range h.Runs {
		fmt.Fprintf(w, "  %2d  %s  %s%s\n", i+1, r.Started.UTC().Format("2006-01-02 15:04:05Z"), r.Dir, runNotes(r))
	}
	return nil
}

// legend says what the strip's glyphs mean, for those the history uses.
func legend() string {
	var parts []string
	for _, v := range []string{"correct", "degraded", "flaky", "wrong", "garbage", "nan", "hang", "crash", "inconclusive", "none"} {
		parts = append(parts, reports.VerdictGlyph(v)+" "+v)
	}
	parts = append(parts, reports.VerdictGlyph(reports.YardstickLost)+" correct with the yardstick lost (after a failure against one; no fix)")
	return strings.Join(parts, ", ")
}

// historyMarkdown is the Markdown view.
func historyMarkdown(w io.Writer, h *History) error {
	fmt.Fprintf(w, "# History of %s: %d cells over %d runs\n\nOldest run first; one glyph per run (%s).\n\n", mdCell(h.Title), len(h.Cells), len(h.Runs), legend())
	fmt.Fprintln(w, "| cell | verdicts | latest | last change | performance | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, c := range h.Cells {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s |\n", c.Cell, c.Strip, c.Latest, mdCell(h.changeText(c)), mdCell(h.perfText(c)), mdCell(c.note()))
	}
	fmt.Fprintln(w, "\n## Runs\n\n| # | started | run | host |\n|---|---|---|---|")
	for i, r := range h.Runs {
		fmt.Fprintf(w, "| %d | %s | `%s` | %s |\n", i+1, r.Started.UTC().Format("2006-01-02 15:04:05Z"), r.Dir, mdCell(hostText(r)+runNotes(r)))
	}
	return nil
}

func mdCell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

// yardstickText says, after a run, what its cells were judged against
// when they chose no yardstick of their own ("" when they chose one).
func yardstickText(r HistoryRun) string {
	if r.Yardstick == "" {
		return ""
	}
	return " (its cells chose no yardstick: judged against " + r.Yardstick + ")"
}

// runNotes says, after a run, what its verdicts are judged by and whether
// it ran to its end: yardstickText, then why it was aborted, then that an
// older classifier's verdicts were re-judged.
func runNotes(r HistoryRun) string {
	s := yardstickText(r)
	if r.Aborted != "" {
		s += " (" + r.Aborted + ": the cells it did not finish are not counted)"
	}
	if r.Judged != "" {
		s += " (" + r.Judged + ")"
	}
	return s
}

// hostText is a run's host in a few words.
func hostText(r HistoryRun) string {
	s := r.Hostname
	if r.GPU != "" {
		s += ", " + r.GPU
	}
	if r.Simulated {
		s += " (simulated)"
	}
	return s
}

// CellAnchor is the id of a cell's section in the history page, for links
// from elsewhere (the published grid).
func CellAnchor(cell string) string {
	b := []byte("c-" + cell)
	for i := 2; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// htmlCell is a cell of the history page.
type htmlCell struct {
	CellHistory
	// LatestMark is the latest point's mark (Point.mark), LatestText its
	// words.
	LatestMark, LatestText     string
	Anchor, Change, Perf, Note string
	Badges                     []htmlBadge
	Chart                      *chart
}

type htmlBadge struct{ Verdict, Glyph, Title string }

// htmlHistory is one group's section of the history page.
type htmlHistory struct {
	Title string
	Cells []htmlCell
	Runs  []string
	NRuns int
}

func historyHTML(w io.Writer, hs []*History) error {
	t, err := template.New("history.html.tmpl").ParseFS(templateFS, "templates/history.html.tmpl", "templates/style.tmpl")
	if err != nil {
		return err
	}
	groups := []htmlHistory{}
	for i, h := range hs {
		g := htmlHistoryOf(h)
		if i > 0 {
			// Two groups (configs or hosts) on one page share cell
			// names: the first keeps the anchors other pages link
			// to, each later one its own.
			for j := range g.Cells {
				g.Cells[j].Anchor = fmt.Sprintf("g%d-%s", i+1, g.Cells[j].Anchor)
			}
		}
		groups = append(groups, g)
	}
	return t.Execute(w, map[string]any{"Groups": groups})
}

func htmlHistoryOf(h *History) htmlHistory {
	var cells []htmlCell
	for _, c := range h.Cells {
		hc := htmlCell{CellHistory: c, Anchor: CellAnchor(c.Cell), Change: h.changeText(c), Perf: h.perfText(c), Note: c.note(), Chart: perfSVG(c),
			LatestMark: string(c.Latest), LatestText: string(c.Latest)}
		if n := len(c.Points); n > 0 && c.Points[n-1].YardstickLost {
			hc.LatestMark, hc.LatestText = reports.YardstickLost, string(c.Latest)+" (yardstick lost: no fix)"
		}
		for i, p := range c.Points {
			title := fmt.Sprintf("run %d (%s): %s", i+1, h.RunLabel(i), p.Verdict)
			if p.YardstickLost {
				title += ", yardstick lost: no fix"
			}
			if p.Unfinished {
				title += ": not counted, " + h.Runs[i].Aborted
			}
			hc.Badges = append(hc.Badges, htmlBadge{Verdict: p.mark(), Glyph: reports.VerdictGlyph(p.mark()), Title: title})
		}
		cells = append(cells, hc)
	}
	runs := make([]string, len(h.Runs))
	for i, r := range h.Runs {
		runs[i] = fmt.Sprintf("%s — %s — %s%s", r.Started.UTC().Format("2006-01-02 15:04:05Z"), h.RunLabel(i), hostText(r), runNotes(r))
	}
	return htmlHistory{Title: h.Title, Cells: cells, Runs: runs, NRuns: len(h.Runs)}
}
