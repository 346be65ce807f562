package reports

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"

	"github.com/bmx-dev/bmx/classify"
	"github.com/olekukonko/tablewriter/tw"
)

var ansiRe = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)`)

// newTable is the one place tablewriter is configured: ASCII borders and
// headers as given, so output is the same on every terminal and in golden
// files.
func newTable(w io.Writer, header []string) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithRendition(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)}),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	)
	t.Header(header)
	return t
}

// TableOptions shape the terminal report.
type TableOptions struct {
	// Color marks verdicts with ANSI colours (only for a terminal, and never
	// when NO_COLOR is set: the caller decides).
	Color bool
	// Width is what the grid must fit; 0 means 100 columns.
	Width int
}

// Table renders the terminal report without colour.
func Table(w io.Writer, rep *Report) error { return TableWith(w, rep, TableOptions{}) }

// verdictColors are ANSI colours per verdict.
var verdictColors = map[string]string{
	"correct": "32", "wrong": "33", "garbage": "35", "nan": "35;1", "crash": "31;1", "hang": "34;1", "flaky": "33;1", "degraded": "36",
	"inconclusive": "90", "skipped": "90", "excluded": "90",
}

func paint(on bool, v string) string {
	if c, ok := verdictColors[strings.TrimSuffix(v, ShapeOnlyMark)]; ok && on {
		return "\x1b[" + c + "m" + v + "\x1b[0m"
	}
	return v
}

// TableWith renders the terminal report: for two or more axes a verdict grid
// that fits the width (long axis values abbreviated, with a legend), then one
// line per cell with the evidence that decided it.
func TableWith(w io.Writer, rep *Report, opts TableOptions) error {
	title := "bmx: " + rep.Run.Name
	if rep.Run.Simulated {
		title += " (SIMULATED host: no real GPU or server was used)"
	}
	fmt.Fprintf(w, "%s\n%s\nhost: %s\n\n", title, rep.SummaryLine(), Clean(rep.Run.Host.Summary()))
	if p := rep.ReferenceProblem(); p != "" {
		fmt.Fprintf(w, "WARNING: %s\n\n", Clean(p))
	}
	perf := rep.Performance()
	g, hasGrid := rep.grid()
	if hasGrid {
		width := opts.Width
		if width == 0 {
			width = 100
		}
		rows, cols, legend := fitGrid(g, width)
		header := []string{Clean(g.rowAxis + ` \ ` + g.colAxis)}
		header = append(header, cols...)
		t := newTable(w, header)
		for i, row := range g.rows {
			line := []string{rows[i]}
			for _, col := range g.cols {
				line = append(line, paint(opts.Color, g.at(row, col)))
			}
			if err := t.Append(line); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		for _, l := range legend {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if l := rep.degradedLegend(); l != "" {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if l := rep.ShapeOnlyLegend(); l != "" {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if l := rep.PredictedLegend(); l != "" {
			fmt.Fprintf(w, "  %s\n", l)
		}
		fmt.Fprintln(w)
		if perf != nil {
			for _, l := range perf.Recommendation {
				fmt.Fprintln(w, Clean(l))
			}
			fmt.Fprintln(w)
		}
		if lines := rep.Blame().Lines(); len(lines) > 0 {
			fmt.Fprintln(w, "blame by axis:")
			for _, l := range lines {
				fmt.Fprintf(w, "  %s\n", clip(Clean(l), 160))
			}
			fmt.Fprintln(w)
		}
	}
	header := []string{"cell", "verdict", "evidence", "signature", "ready"}
	if len(rep.Run.Known) > 0 {
		header = append(header, "known")
	}
	t := newTable(w, header)
	for _, r := range rep.Results {
		row := []string{Clean(r.Cell.ID), paint(opts.Color, r.Shown()), clip(Clean(r.Reason), 70), clip(Clean(r.Signature), 60), readyText(r)}
		if len(rep.Run.Known) > 0 {
			st, _ := rep.Status(r)
			row = append(row, st)
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if same := rep.SameAs(); len(same) > 0 {
		fmt.Fprintln(w, "\nresolved to the same backends:")
		for _, r := range rep.Results {
			if s := same[r.Cell.ID]; s != "" {
				fmt.Fprintf(w, "  %s = %s\n", Clean(r.Cell.ID), Clean(s))
			}
		}
	}
	if perf != nil {
		if err := perfTable(w, perf, !hasGrid); err != nil {
			return err
		}
	}
	clusters := rep.Clusters()
	if len(clusters) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ncauses:")
	t = newTable(w, []string{"verdict", "cells", "signature"})
	for _, c := range clusters {
		if err := t.Append([]string{string(c.Verdict), fmt.Sprint(len(c.Cells)), clip(Clean(c.Signature), 100)}); err != nil {
			return err
		}
	}
	return t.Render()
}

// perfTable renders the performance section: the table, the cells'
// problems and, when no grid showed it already, the recommendation.
func perfTable(w io.Writer, p *Performance, recommend bool) error {
	fmt.Fprintf(w, "\nperformance: %s\n", p.caption())
	t := newTable(w, perfHeader)
	for _, l := range p.lines() {
		cell, verdict := "", ""
		if l.First {
			cell, verdict = Clean(l.Cell), l.Verdict
		}
		if err := t.Append([]string{cell, verdict, fmt.Sprint(l.Concurrency), l.Req, l.TTFT, l.TTFTP90, l.ITL, l.PerRequest, l.Total}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, pr := range p.problemLines() {
		fmt.Fprintf(w, "  problem: %s\n", clip(Clean(pr), 200))
	}
	if recommend {
		for _, l := range p.Recommendation {
			fmt.Fprintln(w, Clean(l))
		}
	}
	return nil
}

func readyText(r Result) string {
	if r.Timings.ReadyMS > 0 {
		return fmt.Sprintf("%.1fs", float64(r.Timings.ReadyMS)/1000)
	}
	return "-"
}

// ProbeTable renders one server's probe verdicts (bmx probe).
func ProbeTable(w io.Writer, url string, j classify.Judgement) error {
	fmt.Fprintf(w, "%s: %s: %s\n\n", Clean(url), j.Verdict, Clean(j.Reason))
	t := newTable(w, []string{"probe", "verdict", "reason", "evidence"})
	for _, p := range j.Probes {
		if err := t.Append([]string{p.Name, string(p.Verdict), clip(Clean(p.Reason), 70), clip(Clean(p.Evidence), 50)}); err != nil {
			return err
		}
	}
	return t.Render()
}

// gridWidth is the width of an ASCII grid with these labels and the widest
// verdict word.
func gridWidth(corner string, rows, cols []string) int {
	w := len([]rune(corner))
	for _, r := range rows {
		w = max(w, len([]rune(r)))
	}
	total := w + 3 + 1
	for _, c := range cols {
		total += max(len([]rune(c)), len("inconclusive")) + 3
	}
	return total
}

// fitGrid abbreviates the grid's row and column labels until the grid fits
// width: first the prefix all values of an axis share ("flashinfer_"), then
// each label cut short. It returns the labels and a legend of what each
// abbreviation stands for.
func fitGrid(g *grid, width int) (rows, cols, legend []string) {
	rows, cols = cleanAll(g.rows), cleanAll(g.cols)
	corner := Clean(g.rowAxis + ` \ ` + g.colAxis)
	if gridWidth(corner, rows, cols) <= width {
		return rows, cols, nil
	}
	abbrev := func(labels []string, limit int) []string {
		out := stripCommonPrefix(labels)
		for i, l := range out {
			if r := []rune(l); limit > 1 && len(r) > limit {
				out[i] = string(r[:limit-1]) + "…"
			}
		}
		if hasDuplicates(out) {
			return labels
		}
		return out
	}
	for limit := 0; limit >= 0; {
		nc, nr := abbrev(cols, limit), abbrev(rows, limit)
		if gridWidth(corner, nr, nc) <= width || limit == 4 {
			add := func(short, long string) {
				if e := short + " = " + long; short != long && !slices.Contains(legend, e) {
					legend = append(legend, e)
				}
			}
			for i := range cols {
				add(nc[i], cols[i])
			}
			for i := range rows {
				add(nr[i], rows[i])
			}
			return nr, nc, legend
		}
		if limit == 0 {
			limit = 16
		} else {
			limit -= 2
		}
	}
	return rows, cols, nil
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Clean(s)
	}
	return out
}

// stripCommonPrefix removes the prefix, up to a "_" or "-", that all labels
// share, if each keeps something.
func stripCommonPrefix(labels []string) []string {
	out := slices.Clone(labels)
	if len(labels) < 2 {
		return out
	}
	p := labels[0]
	for _, l := range labels[1:] {
		for !strings.HasPrefix(l, p) {
			p = p[:len(p)-1]
		}
	}
	cut := strings.LastIndexAny(p, "_-")
	if cut < 0 {
		return out
	}
	for i, l := range labels {
		if len(l) <= cut+1 {
			return slices.Clone(labels)
		}
		out[i] = l[cut+1:]
	}
	return out
}

func hasDuplicates(ss []string) bool {
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}
