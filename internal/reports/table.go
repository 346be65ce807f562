package reports

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
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
	// Width is what the report's tables must fit: the per-cell table and
	// the causes are cut to it, the grid's labels abbreviated (a grid still
	// too wide is said so, not mangled). 0 means DefaultWidth; the caller
	// knows whether it writes to a terminal of another width.
	Width int
}

// DefaultWidth is the width a report fits when it is not written to a
// terminal (a file, a pipe, a CI log).
const DefaultWidth = 100

// Table renders the terminal report without colour.
func Table(w io.Writer, rep *record.Report) error { return TableWith(w, rep, TableOptions{}) }

// verdictColors are ANSI colours per verdict.
var verdictColors = map[string]string{
	"correct": "32", "wrong": "33", "garbage": "35", "nan": "35;1", "crash": "31;1", "hang": "34;1", "flaky": "33;1", "degraded": "36",
	"inconclusive": "90", "skipped": "90", "excluded": "90",
}

func paint(on bool, v string) string {
	if c, ok := verdictColors[strings.TrimSuffix(v, record.ShapeOnlyMark)]; ok && on {
		return "\x1b[" + c + "m" + v + "\x1b[0m"
	}
	return v
}

// TableWith renders the terminal report: for two or more axes a verdict grid
// that fits the width (long axis values abbreviated, with a legend), then one
// line per cell with the evidence that decided it.
func TableWith(w io.Writer, rep *record.Report, opts TableOptions) error {
	title := "bmx: " + rep.Run.Name
	if rep.Run.Simulated {
		title += " (SIMULATED host: no real GPU or server was used)"
	}
	fmt.Fprintf(w, "%s\n%s\nhost: %s\n\n", title, SummaryLine(rep), record.Clean(rep.Run.Host.Summary()))
	if p := ReferenceProblem(rep); p != "" {
		fmt.Fprintf(w, "WARNING: %s\n\n", record.Clean(p))
	}
	if c := AgreementChanges(rep); c != "" {
		fmt.Fprintf(w, "%s\n\n", record.Clean(c))
	}
	perf := PerformanceOf(rep)
	g, hasGrid := gridOf(rep)
	width := opts.Width
	if width <= 0 {
		width = DefaultWidth
	}
	if hasGrid {
		if err := gridSection(w, rep, g, perf, opts.Color, width); err != nil {
			return err
		}
	}
	if err := detailTable(w, rep, opts.Color, width); err != nil {
		return err
	}
	if same := SameAs(rep); len(same) > 0 {
		fmt.Fprintln(w, "\nresolved to the same backends:")
		var lines []string
		for _, r := range rep.Results {
			if s := same[r.Cell.ID]; s != "" {
				lines = append(lines, fmt.Sprintf("%s = %s", record.Clean(r.Cell.ID), record.Clean(s)))
			}
		}
		for _, l := range boundLines(lines, listedLines, "cells") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if perf != nil {
		if err := perfTable(w, rep, perf, !hasGrid, width); err != nil {
			return err
		}
	}
	clusters := Clusters(rep)
	if len(clusters) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ncauses:")
	causes := fitTable{header: []string{"verdict", "cells", "signature"}}
	for _, c := range clusters {
		causes.rows = append(causes.rows, []string{string(c.Verdict), fmt.Sprint(len(c.Cells)), record.Clean(c.Signature)})
	}
	return causes.render(w, width, []fitStep{{col: 2, min: 20}}, nil)
}

// gridSection is the verdict grid fitted to width, with its legends, the
// recommendation (perf: nil when nothing was measured) and the blame by
// axis.
func gridSection(w io.Writer, rep *record.Report, g *grid, perf *Performance, color bool, width int) error {
	rows, cols, legend := fitGrid(g, width)
	header := []string{record.Clean(g.rowAxis + ` \ ` + g.colAxis)}
	header = append(header, cols...)
	var grid bytes.Buffer
	t := newTable(&grid, header)
	for i, row := range g.rows {
		line := []string{rows[i]}
		for _, col := range g.cols {
			line = append(line, paint(color, g.at(row, col)))
		}
		if err := t.Append(line); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	// The grid is read across: cut, it would lie. Too wide, it is
	// printed whole and said so.
	// A grid of many columns wrapped is no longer read across either: past
	// the width of a large run, a per-axis summary takes its place.
	switch n := widest(grid.String()); {
	case n > width && len(rep.Results) > tableCells:
		if err := axisSummary(w, rep, n, width); err != nil {
			return err
		}
		legend = nil
	case n > width:
		fmt.Fprintf(w, "(the grid is %d columns wide, more than the %d available: it wraps)\n", n, width)
		fallthrough
	default:
		if _, err := w.Write(grid.Bytes()); err != nil {
			return err
		}
	}
	for _, l := range legend {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if l := degradedLegend(rep); l != "" {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if l := ShapeOnlyLegend(rep); l != "" {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if l := PredictedLegend(rep); l != "" {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w)
	if perf != nil {
		collapseNotes(w, perf.Recommendation)
		fmt.Fprintln(w)
	}
	if lines := BlameOf(rep).Lines(); len(lines) > 0 {
		fmt.Fprintln(w, "blame by axis:")
		for _, l := range boundBlame(lines) {
			fmt.Fprintf(w, "  %s\n", clip(record.Clean(l), 160))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// Columns of the per-cell table.
const (
	colCell = iota
	colVerdict
	colEvidence
	colSignature
	colReady
	colKnown
)

// detailTable renders one line per cell with the evidence that decided it,
// fitted to width by cutting the least useful first: the signature and the
// reason are shortened (an ellipsis marks the cut), then the ready time is
// left out, then one column shows the signature of failed cells and the
// reason of the others, then the cell IDs lose their axis names and the
// prefix all values of an axis share, and the cell IDs and that column are
// shortened further. The verdict and the known-issue
// status are never cut.
func detailTable(w io.Writer, rep *record.Report, color bool, width int) error {
	t := fitTable{header: []string{"cell", "verdict", "reason", "signature", "ready"}, cut: map[int]func(string, int) string{colCell: cutValues}}
	if len(rep.Run.Known) > 0 {
		t.header = append(t.header, "known")
	}
	idx, more, bounded := boundedRows(rep)
	if !bounded {
		for i := range rep.Results {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		r := rep.Results[i]
		row := []string{record.Clean(r.Cell.ID), paint(color, r.Shown()), record.Clean(r.Reason), record.Clean(r.Signature), readyText(r)}
		if len(rep.Run.Known) > 0 {
			st, _ := Status(rep, r)
			row = append(row, st)
		}
		t.rows = append(t.rows, row)
	}
	// Where a cell crashed, hung or hit NaN, its signature (what failed)
	// says more than the start of its reason (how the process ended): when
	// the two columns do not both fit, one column shows the signature of
	// those cells and the reason of the others.
	failed := func(i int) bool {
		switch rep.Results[idx[i]].Verdict {
		case classify.Crash, classify.Hang, classify.NaN, classify.Flaky:
			return true
		}
		return false
	}
	steps := []fitStep{
		{col: colSignature, min: 24}, {col: colEvidence, min: reasonMin},
		{col: colReady, drop: true},
		{col: colSignature, into: colEvidence, header: "why", fold: failed},
		{col: colCell, alt: true}, {col: colEvidence, min: 32},
		{col: colCell, min: 24}, {col: colEvidence, min: 16},
		{col: colCell, min: 12}, {col: colEvidence, min: 8},
	}
	compact := func() (string, []string, bool) {
		header, ids, ok := compactCells(rep)
		picked := make([]string, len(idx))
		for j, i := range idx {
			picked[j] = ids[i]
		}
		return header, picked, ok
	}
	if err := t.render(w, width, steps, compact); err != nil {
		return err
	}
	if bounded {
		fmt.Fprintln(w, more)
	}
	return nil
}

// reasonMin is as far as the reason is cut while every column stays: a
// reason cut shorter says too little ("the server was killed by…"); the
// table leaves out the ready time and shows the signature of failed cells
// in its place first, which gives it the rest of the terminal's width.
const reasonMin = 48

// compactCells are the cell IDs as the grid labels them: the values only,
// each axis's shared prefix dropped ("cutlass,cudnn" for
// "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"), under a header
// of the axis names. ok is false when two cells would read the same.
func compactCells(rep *record.Report) (header string, ids []string, ok bool) {
	short := map[string]map[string]string{}
	var names []string
	for _, a := range rep.Run.Axes {
		names = append(names, a.Name)
		vals := stripCommonPrefix(a.Values)
		short[a.Name] = map[string]string{}
		for i, v := range a.Values {
			short[a.Name][v] = vals[i]
		}
	}
	for _, r := range rep.Results {
		var parts []string
		for _, av := range r.Cell.Values {
			if s, ok := short[av.Axis][av.Value]; ok {
				parts = append(parts, s)
			} else {
				parts = append(parts, av.Axis+"="+av.Value)
			}
		}
		if len(r.Cell.Values) == 0 {
			parts = append(parts, r.Cell.ID)
		}
		ids = append(ids, record.Clean(strings.Join(parts, ",")))
	}
	return record.Clean(strings.Join(names, ",")), ids, !hasDuplicates(ids)
}

// fitStep is one way to make a table narrower: shorten column col to min
// display columns, leave it out (drop), or show it in its compact form
// (alt).
type fitStep struct {
	col  int
	min  int
	drop bool
	alt  bool
	// into > 0 folds col into column into: a row's non-empty col replaces
	// its value there where fold allows it (every row when nil), col is
	// left out, and into is headed header.
	into   int
	header string
	fold   func(row int) bool
}

// fitTable is a table whose text columns are cut to fit a width.
type fitTable struct {
	header []string
	rows   [][]string
	// cut shortens a column's text to a width where plain truncation
	// would lose what tells rows apart (nil: cut the end).
	cut map[int]func(text string, width int) string
}

// tableWidth is the display width of an ASCII table with these column
// widths: a bar and a space either side of each cell.
func tableWidth(widths []int, keep []bool) int {
	total, n := 1, 0
	for i, w := range widths {
		if keep[i] {
			total += w + 3
			n++
		}
	}
	return total
}

func (t *fitTable) natural() []int {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = twwidth.Width(h)
	}
	for _, row := range t.rows {
		for i, c := range row {
			widths[i] = max(widths[i], twwidth.Width(c))
		}
	}
	return widths
}

// render writes the table fitted to width: steps are taken in order until it
// fits; room left after the last step goes back to the columns shortened.
// alt gives the compact form of the first column for a step with alt set.
func (t *fitTable) render(w io.Writer, width int, steps []fitStep, alt func() (string, []string, bool)) error {
	widths, keep := t.fit(width, steps, alt)
	pick := func(row []string) []string {
		var out []string
		for i, c := range row {
			if !keep[i] {
				continue
			}
			if twwidth.Width(c) > widths[i] {
				if cut := t.cut[i]; cut != nil {
					c = cut(c, widths[i])
				} else {
					c = twwidth.Truncate(c, widths[i], tw.CharEllipsis)
				}
			}
			out = append(out, c)
		}
		return out
	}
	tab := newTable(w, pick(t.header))
	for _, row := range t.rows {
		if err := tab.Append(pick(row)); err != nil {
			return err
		}
	}
	return tab.Render()
}

// fit takes steps, in order, until the table fits width, and returns each
// column's width and whether it is kept. A step that folds a column or
// puts in its compact form changes the table's header and rows.
func (t *fitTable) fit(width int, steps []fitStep, alt func() (string, []string, bool)) (widths []int, keep []bool) {
	natural := t.natural()
	widths = slices.Clone(natural)
	keep = make([]bool, len(widths))
	for i := range keep {
		keep[i] = true
	}
	var shortened []int
	for _, s := range steps {
		over := tableWidth(widths, keep) - width
		if over <= 0 {
			break
		}
		if s.col >= len(widths) || !keep[s.col] {
			continue
		}
		switch {
		case s.drop:
			keep[s.col] = false
		case s.into > 0:
			for i, row := range t.rows {
				if row[s.col] != "" && (s.fold == nil || s.fold(i)) {
					row[s.into] = row[s.col]
				}
			}
			keep[s.col] = false
			t.header[s.into] = s.header
			natural[s.into] = t.natural()[s.into]
			widths[s.into] = natural[s.into]
		case s.alt:
			if alt == nil {
				continue
			}
			header, ids, ok := alt()
			if !ok {
				continue
			}
			t.header[s.col] = header
			for i := range t.rows {
				t.rows[i][s.col] = ids[i]
			}
			natural[s.col] = t.natural()[s.col]
			widths[s.col] = min(widths[s.col], natural[s.col])
		default:
			least := max(s.min, twwidth.Width(t.header[s.col]))
			if widths[s.col] > least {
				widths[s.col] = max(least, widths[s.col]-over)
				if !slices.Contains(shortened, s.col) {
					shortened = append(shortened, s.col)
				}
			}
		}
	}
	// Give back what the last step took beyond need, to the column
	// shortened last first.
	for i := len(shortened) - 1; i >= 0; i-- {
		c := shortened[i]
		if room := width - tableWidth(widths, keep); room > 0 && keep[c] {
			widths[c] = min(natural[c], widths[c]+room)
		}
	}
	return widths, keep
}

// widest is the display width of text's widest line.
func widest(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		n = max(n, twwidth.Width(l))
	}
	return n
}

// perfTermHeader names the terminal performance table's columns, shorter
// than perfHeader: the caption says the figures are medians with their
// min-max spread.
var perfTermHeader = []string{"cell", "verdict", "conc", "reqs", "TTFT ms", "TTFT p90", "TPOT ms", "decode", "tok/s/req incl TTFT", "tok/s total"}

// The terminal performance table's columns.
const (
	perfColCell = iota
	perfColVerdict
	perfColConcurrency
	perfColRequests
	perfColTTFT
	perfColTTFTP90
	perfColTPOT
	perfColDecode
)

// perfTable renders the performance section fitted to width: the table,
// the cells' problems and, when no grid showed it already, the
// recommendation. To fit, the cells are named as the grid names them, then
// the TTFT p90, the request count (a failed request is also a problem line
// below) and the TPOT (the inverse of the decode rate beside it) are left
// out, then the cell names are cut, then the decode rate goes. The verdict
// and the tokens/s are never cut.
func perfTable(w io.Writer, rep *record.Report, p *Performance, recommend bool, width int) error {
	t := fitTable{header: slices.Clone(perfTermHeader), cut: map[int]func(string, int) string{perfColCell: cutValues}}
	var cells []string // each row's cell ID, "" on a cell's later rows
	shown := p
	if len(p.Cells) > tableCells {
		cut := *p
		cut.Cells = p.Cells[:tableFirst]
		shown = &cut
	}
	for _, l := range shown.lines() {
		cell, verdict := "", ""
		if l.First {
			cell, verdict = l.Cell, l.Verdict
		}
		cells = append(cells, cell)
		t.rows = append(t.rows, []string{record.Clean(cell), verdict, fmt.Sprint(l.Concurrency), l.Req, l.TTFT, l.TTFTP90, l.TPOT, l.Decode, l.PerRequest, l.Total})
	}
	compact := func() (string, []string, bool) {
		header, ids, ok := compactCells(rep)
		short := map[string]string{}
		for i, r := range rep.Results {
			short[r.Cell.ID] = ids[i]
		}
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = short[c]
		}
		return header, out, ok
	}
	steps := []fitStep{
		{col: perfColCell, alt: true},
		{col: perfColTTFTP90, drop: true}, {col: perfColRequests, drop: true},
		{col: perfColTPOT, drop: true}, {col: perfColCell, min: 16}, {col: perfColCell, min: 12},
		{col: perfColDecode, drop: true},
	}
	var table bytes.Buffer
	if err := t.render(&table, width, steps, compact); err != nil {
		return err
	}
	caption := p.caption()
	switch {
	case !strings.Contains(table.String(), "| decode "):
		caption = strings.Replace(caption, tpotCaption, "", 1)
	case !strings.Contains(table.String(), "| TPOT ms "):
		caption = strings.Replace(caption, tpotCaption, "; decode = tok/s per request after the first token, TTFT left out", 1)
	default:
		caption = strings.Replace(caption, tpotCaption, "; TPOT = (end-to-end - TTFT) / (tokens - 1), decode = tok/s per request after the first token (1000 / TPOT)", 1)
	}
	fmt.Fprintf(w, "\nperformance: %s\n%s", caption, table.String())
	if shown != p {
		fmt.Fprintf(w, "(the %d fastest of %d measured cells; %d more; %s)\n", len(shown.Cells), len(p.Cells), len(p.Cells)-len(shown.Cells), elsewhere)
	}
	problems := p.problemLines()
	if len(problems) > listedLines {
		problems = boundLines(problems, listedLines, "problems")
	}
	for _, pr := range problems {
		fmt.Fprintf(w, "  problem: %s\n", clip(record.Clean(pr), 200))
	}
	if recommend {
		collapseNotes(w, p.Recommendation)
	}
	return nil
}

func readyText(r record.Result) string {
	if r.Timings.ReadyMS > 0 {
		return fmt.Sprintf("%.1fs", float64(r.Timings.ReadyMS)/1000)
	}
	return "-"
}

// ProbeTable renders one server's probe verdicts (bmx probe).
func ProbeTable(w io.Writer, url string, j classify.Judgement) error {
	fmt.Fprintf(w, "%s: %s: %s\n\n", record.Clean(url), j.Verdict, record.Clean(j.Reason))
	t := newTable(w, []string{"probe", "verdict", "reason", "evidence"})
	for _, p := range j.Probes {
		if err := t.Append([]string{p.Name, string(p.Verdict), clip(record.Clean(p.Reason), 70), clip(record.Clean(p.Evidence), 50)}); err != nil {
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
	corner := record.Clean(g.rowAxis + ` \ ` + g.colAxis)
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
		out[i] = record.Clean(s)
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

// cutValues shortens a cell name ("cutlass,trtllm" or
// "moe=cutlass,fp4=trtllm") to width by cutting its longest values first,
// each keeping its start, so the last value, often the one that tells two
// rows apart, is not the one cut away (issue 37). A name of one value, or
// one that cannot be cut so, loses its end.
func cutValues(text string, width int) string {
	parts := strings.Split(text, ",")
	if len(parts) < 2 {
		return twwidth.Truncate(text, width, tw.CharEllipsis)
	}
	runes := make([][]rune, len(parts))
	keep := make([]int, len(parts))
	total := len(parts) - 1
	for i, p := range parts {
		runes[i] = []rune(p)
		keep[i] = len(runes[i])
		total += keep[i]
	}
	for total > width {
		longest := 0
		for i := range keep {
			if keep[i] > keep[longest] {
				longest = i
			}
		}
		if keep[longest] <= 3 {
			return twwidth.Truncate(text, width, tw.CharEllipsis)
		}
		keep[longest]--
		total--
	}
	out := make([]string, len(parts))
	for i, r := range runes {
		out[i] = string(r)
		if keep[i] < len(r) {
			out[i] = string(r[:keep[i]-1]) + "…"
		}
	}
	if s := strings.Join(out, ","); twwidth.Width(s) <= width {
		return s
	}
	return twwidth.Truncate(text, width, tw.CharEllipsis)
}
