package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/matrix"
)

// Report is one run's metadata and results, the input of every renderer.
type Report struct {
	Run     *Run
	Results []Result
}

// AxisValues are an axis and its values in config order.
type AxisValues struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// Summary counts cells per verdict.
func (rep *Report) Summary() map[classify.Verdict]int {
	sum := map[classify.Verdict]int{}
	for _, r := range rep.Results {
		sum[r.Verdict]++
	}
	return sum
}

// SummaryLine is "12 cells: 1 correct, 1 nan, 3 garbage, 1 hang, 6 crash".
func (rep *Report) SummaryLine() string {
	sum := rep.Summary()
	var parts []string
	for _, v := range classify.Verdicts {
		if sum[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", sum[v], v))
		}
	}
	s := fmt.Sprintf("%d cells: %s", len(rep.Results), strings.Join(parts, ", "))
	if n := len(rep.Run.Excluded); n > 0 {
		s += fmt.Sprintf(" (%d excluded)", n)
	}
	if n := rep.Predicted(); n > 0 {
		s += fmt.Sprintf(" (%d predicted, not started: --prune)", n)
	}
	return s
}

// grid lays out a run of two or more axes: the last axis across, the others
// down (their combinations, in config order).
type grid struct {
	rowAxis, colAxis string
	rows, cols       []string
	cells            map[[2]string]string
}

// grid returns the verdict grid, or false when the run has fewer than two
// axes.
func (rep *Report) grid() (*grid, bool) {
	axes := rep.Run.Axes
	if len(axes) < 2 {
		return nil, false
	}
	down, across := axes[:len(axes)-1], axes[len(axes)-1]
	var names []string
	rows := []string{""}
	for _, a := range down {
		names = append(names, a.Name)
		var next []string
		for _, prefix := range rows {
			for _, v := range a.Values {
				next = append(next, strings.TrimPrefix(prefix+","+v, ","))
			}
		}
		rows = next
	}
	g := &grid{
		rowAxis: strings.Join(names, ","), colAxis: across.Name,
		rows: rows, cols: slices.Clone(across.Values), cells: map[[2]string]string{},
	}
	place := func(c matrix.Cell, text string) {
		pos := rep.gridPos(c)
		rv, cv := pos[0], pos[1]
		if !slices.Contains(g.rows, rv) {
			g.rows = append(g.rows, rv)
		}
		if !slices.Contains(g.cols, cv) {
			g.cols = append(g.cols, cv)
		}
		g.cells[[2]string{rv, cv}] = text
	}
	for _, c := range rep.Run.Excluded {
		place(c, string(classify.Excluded))
	}
	for _, r := range rep.Results {
		place(r.Cell, r.Shown())
	}
	// Rows no cell reached (an --only run) are left out.
	g.rows = slices.DeleteFunc(g.rows, func(row string) bool {
		return !slices.ContainsFunc(g.cols, func(col string) bool { _, ok := g.cells[[2]string{row, col}]; return ok })
	})
	return g, true
}

// gridPos is where a cell sits in the grid: its row (the values of every
// axis but the last, an axis it has no value on read "(default)") and its
// column (the last axis's value).
func (rep *Report) gridPos(c matrix.Cell) [2]string {
	axes := rep.Run.Axes
	value := func(axis string) string {
		if v, ok := c.Value(axis); ok {
			return v
		}
		return "(default)"
	}
	var parts []string
	for _, a := range axes[:len(axes)-1] {
		parts = append(parts, value(a.Name))
	}
	return [2]string{strings.Join(parts, ","), value(axes[len(axes)-1].Name)}
}

func (g *grid) at(row, col string) string {
	if v, ok := g.cells[[2]string{row, col}]; ok {
		return v
	}
	return "-"
}

// jsonReport is report.json's shape.
type jsonReport struct {
	Run              *Run                     `json:"run"`
	Summary          map[classify.Verdict]int `json:"summary"`
	ReferenceProblem string                   `json:"reference_problem,omitempty"`
	Causes           []Cluster                `json:"causes"`
	Blame            BlameTable               `json:"blame"`
	Known            map[string]string        `json:"known_status,omitempty"`
	SameAs           map[string]string        `json:"same_effective_config,omitempty"`
	// Performance is the serving figures of the correct and degraded
	// cells and the recommendation (absent when none was measured).
	Performance *Performance `json:"performance,omitempty"`
	Cells       []Result     `json:"cells"`
}

// JSON renders the report as one JSON document.
func JSON(w io.Writer, rep *Report) error {
	cells := rep.Results
	if cells == nil {
		cells = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	known := map[string]string{}
	for _, r := range cells {
		if st := rep.statusText(r); st != "" {
			known[r.Cell.ID] = st
		}
	}
	return enc.Encode(jsonReport{Run: rep.Run, Summary: rep.Summary(), ReferenceProblem: rep.ReferenceProblem(),
		Causes: rep.Clusters(), Blame: rep.Blame(), Known: known, SameAs: rep.SameAs(), Performance: rep.Performance(), Cells: cells})
}

// Clean makes server text safe for a terminal or a document: ANSI escapes and
// control characters are removed (newlines and tabs become spaces) and
// invalid UTF-8 is replaced.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = ansiRe.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
}

// clip shortens s to n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Formats are the report formats Render knows.
var Formats = []string{"table", "md", "html", "json", "csv", "junit"}

// Render writes the report in a format; "table" has no colour (see
// TableWith).
func Render(format string, w io.Writer, rep *Report) error {
	switch format {
	case "table":
		return Table(w, rep)
	case "md", "markdown":
		return Markdown(w, rep)
	case "html":
		return HTML(w, rep)
	case "json":
		return JSON(w, rep)
	case "csv":
		return CSV(w, rep)
	case "junit":
		return JUnit(w, rep)
	}
	return fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))
}
