package reports

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// The terminal report of a large run is bounded: past these sizes it gives
// counts, the first few and where the rest are (report.md and the other
// formats keep every cell), so 10,000 cells print a screenful, not 14,000
// lines. Runs at or under the bounds print every line, as they always did.
const (
	// tableCells is the most cells the per-cell table lists whole.
	tableCells = 50
	// tableFirst is how many cells, in run order, a bounded table lists
	// after the examples of each cause.
	tableFirst = 20
	// causeExamples is how many cells of each cause a bounded table lists.
	causeExamples = 3
	// axisValues is the most values of one axis listed line by line (in the
	// per-axis summary and the blame by axis); past it the values with the
	// most failures are listed, axisTop of them.
	axisValues = 12
	axisTop    = 10
	// repeatNotes is the most lines alike (the same note about another
	// cell) printed one by one; more are one line with a count.
	repeatNotes = 3
	// listedLines bounds other lists (same backends, perf problems).
	listedLines = 20
)

// elsewhere says where the cells a bounded section leaves out are.
const elsewhere = "every cell: report.md in the run directory, or bmx report --format md"

// boundedRows picks the rows of a per-cell table for a run too large to
// list: causeExamples cells of each cause (failed cells grouped by
// signature, most cells first), then the first tableFirst cells in run
// order; ok is false when the run is small enough to list whole.
func boundedRows(rep *record.Report) (idx []int, note string, ok bool) {
	if len(rep.Results) <= tableCells {
		return nil, "", false
	}
	pos := map[string]int{}
	for i, r := range rep.Results {
		pos[r.Cell.ID] = i
	}
	seen := map[int]bool{}
	clusters := Clusters(rep)
	for _, c := range clusters {
		for _, id := range c.Cells[:min(len(c.Cells), causeExamples)] {
			if i, ok := pos[id]; ok && !seen[i] {
				seen[i] = true
				idx = append(idx, i)
			}
		}
	}
	examples := len(idx)
	for i := 0; i < len(rep.Results) && len(idx) < examples+tableFirst; i++ {
		if !seen[i] {
			seen[i] = true
			idx = append(idx, i)
		}
	}
	note = fmt.Sprintf("%d of %d cells shown", len(idx), len(rep.Results))
	if len(clusters) > 0 {
		note += fmt.Sprintf(": the first %d of each of the %d causes (counts under \"causes\"), then the first %d", causeExamples, len(clusters), tableFirst)
	} else {
		note += fmt.Sprintf(": the first %d", tableFirst)
	}
	return idx, fmt.Sprintf("(%s; %d more; %s)", note, len(rep.Results)-len(idx), elsewhere), true
}

// collapseNotes prints lines, those alike past repeatNotes as one: a
// "note: CELL is ..." line differs from the next only in its cell, and 769
// of them ("is faster but degraded") say one thing 769 times.
func collapseNotes(w io.Writer, lines []string) {
	alike := func(l string) (cell, rest string, ok bool) {
		after, ok := strings.CutPrefix(l, "note: ")
		if !ok {
			return "", "", false
		}
		return strings.Cut(after, " is ")
	}
	cells := map[string][]string{}
	for _, l := range lines {
		if cell, rest, ok := alike(l); ok {
			cells[rest] = append(cells[rest], cell)
		}
	}
	said := map[string]bool{}
	for _, l := range lines {
		_, rest, ok := alike(l)
		if !ok || len(cells[rest]) <= repeatNotes {
			fmt.Fprintln(w, record.Clean(l))
			continue
		}
		if said[rest] {
			continue
		}
		said[rest] = true
		c := cells[rest]
		fmt.Fprintln(w, record.Clean(fmt.Sprintf("note: %d cells are %s (%s; %d more in report.md)",
			len(c), rest, strings.Join(c[:repeatNotes], "; "), len(c)-repeatNotes)))
	}
}

// boundLines cuts a list of lines to limit, saying how many more and where.
func boundLines(lines []string, limit int, what string) []string {
	if len(lines) <= limit {
		return lines
	}
	return append(slices.Clone(lines[:limit]), fmt.Sprintf("… %d more %s in report.md", len(lines)-limit, what))
}

// boundBlame keeps, of each axis's blame lines ("axis=value: ..."), the
// first axisTop when the axis has more than axisValues.
func boundBlame(lines []string) []string {
	byAxis := map[string]int{}
	for _, l := range lines {
		a, _, _ := strings.Cut(l, "=")
		byAxis[a]++
	}
	var out []string
	shown := map[string]int{}
	for _, l := range lines {
		a, _, _ := strings.Cut(l, "=")
		if byAxis[a] <= axisValues {
			out = append(out, l)
			continue
		}
		if shown[a]++; shown[a] <= axisTop {
			out = append(out, l)
		}
		if shown[a] == byAxis[a] {
			out = append(out, fmt.Sprintf("… %d more values of %s in report.md", byAxis[a]-axisTop, a))
		}
	}
	return out
}

// axisSummary is what replaces the verdict grid when it would be wider
// than the terminal: per axis value, how many cells had each verdict. An
// axis of more than axisValues values lists the axisTop with the most
// failed cells.
func axisSummary(w io.Writer, rep *record.Report, gridCols, width int) error {
	total := map[string]int{}
	for _, r := range rep.Results {
		total[r.Shown()]++
	}
	verdicts := slices.SortedFunc(func(yield func(string) bool) {
		for v := range total {
			if !yield(v) {
				return
			}
		}
	}, func(a, b string) int { return cmp.Or(cmp.Compare(total[b], total[a]), cmp.Compare(a, b)) })
	fmt.Fprintf(w, "(the grid is %d columns wide, more than the %d available: per axis value, the cells by verdict instead; the grid is in report.md)\n", gridCols, width)
	for _, a := range rep.Run.Axes {
		counts := map[string]map[string]int{}
		failed := map[string]int{}
		for _, r := range rep.Results {
			for _, av := range r.Cell.Values {
				if av.Axis != a.Name {
					continue
				}
				if counts[av.Value] == nil {
					counts[av.Value] = map[string]int{}
				}
				counts[av.Value][r.Shown()]++
				if r.Verdict != classify.Correct {
					failed[av.Value]++
				}
			}
		}
		values := slices.Clone(a.Values)
		more := 0
		if len(values) > axisValues {
			slices.SortStableFunc(values, func(x, y string) int { return cmp.Compare(failed[y], failed[x]) })
			more = len(values) - axisTop
			values = values[:axisTop]
		}
		t := fitTable{header: append([]string{record.Clean(a.Name), "cells"}, verdicts...)}
		for _, v := range values {
			row := []string{record.Clean(v), ""}
			n := 0
			for _, vd := range verdicts {
				n += counts[v][vd]
				row = append(row, fmt.Sprint(counts[v][vd]))
			}
			row[1] = fmt.Sprint(n)
			t.rows = append(t.rows, row)
		}
		if err := t.render(w, width, []fitStep{{col: 0, min: 12}}, nil); err != nil {
			return err
		}
		if more > 0 {
			fmt.Fprintf(w, "(the %d values of %s with the most failed cells; %d more in report.md)\n", axisTop, record.Clean(a.Name), more)
		}
	}
	return nil
}
