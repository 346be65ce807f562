// Package reports shows runs: it renders a run's record (record.Report) as
// a terminal table, Markdown, HTML, JSON, CSV and JUnit, compares two runs
// (diff, the regression and performance gates), explains a run (the causes,
// the blame table, known-issue status, the performance table and the
// recommendation), scores the classifier against labelled cases, and
// merges the runs of one sweep, with the merge's own report.
//
// It reads the record and writes report files, and never imports the
// launcher: old runs are re-rendered without starting anything, and what
// runs a sweep links no renderer.
package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// SummaryLine is "12 cells: 1 correct, 1 nan, 3 garbage, 1 hang, 6 crash,
// 1 skipped": every cell counted, so the counts add up to the total.
func SummaryLine(rep *record.Report) string {
	sum := rep.Summary()
	starred := 0 // correct*: nothing shows the answers are right
	for _, r := range rep.Results {
		if r.Verdict == classify.Correct && r.ShapeOnly {
			starred++
		}
	}
	var parts []string
	for _, v := range append(slices.Clone(classify.Verdicts), classify.Skipped) {
		n := sum[v]
		if v == classify.Correct {
			n -= starred
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
		if v == classify.Correct && starred > 0 {
			parts = append(parts, fmt.Sprintf("%d %s%s", starred, v, record.ShapeOnlyMark))
		}
	}
	s := fmt.Sprintf("%d cells: %s", len(rep.Results), strings.Join(parts, ", "))
	if n := rep.Run.ExcludedCells(); n > 0 {
		s += fmt.Sprintf(" (%d excluded)", n)
	}
	if n := rep.Predicted(); n > 0 {
		s += fmt.Sprintf(" (%d predicted, not started: --prune)", n)
	}
	return s
}

// ShapeOnlyLegend explains correct*, or is "" when no cell has it.
func ShapeOnlyLegend(rep *record.Report) string {
	for _, r := range rep.Results {
		if r.ShapeOnly && r.Verdict == classify.Correct {
			if rep.Agreement != nil && (rep.Agreement.Status == classify.Undecided || rep.Agreement.Status == classify.NoYardstick) {
				return "correct* = nothing shows the answers are right: some probe had no expectation to meet, and bmx could not tell which cells' answers to judge them against (see the warning above)"
			}
			return "correct* = judged by shape only: some probe had no expectation to meet and no reference answer to agree with, so nothing shows the answers are right"
		}
	}
	return ""
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
func gridOf(rep *record.Report) (*grid, bool) {
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
		pos := gridPos(rep, c)
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
func gridPos(rep *record.Report, c matrix.Cell) [2]string {
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
	Run              *record.Run              `json:"run"`
	Summary          map[classify.Verdict]int `json:"summary"`
	ReferenceProblem string                   `json:"reference_problem,omitempty"`
	// Judged says the cells were judged by an older classifier and
	// whether they are shown re-judged or as stored (record.Judged.Sentence).
	Judged    string              `json:"judged,omitempty"`
	Agreement *classify.Agreement `json:"agreement,omitempty"`
	// AgreementChanges are the cells whose verdict the agreement among
	// cells changed from the one judged as the cell ended.
	AgreementChanges []classify.VerdictChange `json:"agreement_changes,omitempty"`
	Causes           []Cluster                `json:"causes"`
	Blame            BlameTable               `json:"blame"`
	Known            map[string]string        `json:"known_status,omitempty"`
	SameAs           map[string]string        `json:"same_effective_config,omitempty"`
	// Performance is the serving figures of the correct and degraded
	// cells and the recommendation (absent when none was measured).
	Performance *Performance `json:"performance,omitempty"`
	// RawResults names the run's file of raw probe data (results.jsonl):
	// each cell's whole answers, logprob steps and log tail, which the
	// cells below give cut (jsonCell).
	RawResults string          `json:"raw_results"`
	Cells      []record.Result `json:"cells"`
}

// What report.json keeps of a cell's raw evidence: the head of each
// answer, reasoning, prompt and error, and the last lines of the log (as
// the HTML report shows them). The logprob steps are left out: they are
// raw data for the numerics, whose figures the cell gives.
const (
	jsonTextBytes = 2 << 10
	jsonLogLines  = htmlLogLines
)

// jsonCell is the cell r as report.json gives it: what a reader needs
// (verdict, reason, evidence, probes, numerics, perf, agreement) whole,
// the raw evidence cut to jsonTextBytes a text and jsonLogLines of log,
// without logprob steps; results.jsonl holds it all.
func jsonCell(r record.Result) record.Result {
	if strings.Count(strings.TrimRight(r.LogTail, "\n"), "\n") >= jsonLogLines {
		r.LogTail = lastLines(r.LogTail, jsonLogLines)
	}
	if r.Observations == nil {
		return r
	}
	obs := make([]evidence.Observation, len(r.Observations))
	for i, o := range r.Observations {
		o.Text, o.TextBytes = cutText(o.Text, o.TextBytes)
		o.Reasoning, o.ReasoningBytes = cutText(o.Reasoning, o.ReasoningBytes)
		o.Prompt, _ = cutText(o.Prompt, 0)
		o.Err, _ = cutText(o.Err, 0)
		if o.Logprobs != nil && o.Logprobs.Steps != nil {
			lp := *o.Logprobs
			lp.Steps = nil
			o.Logprobs = &lp
		}
		obs[i] = o
	}
	r.Observations = obs
	return r
}

// cutText is s cut to its first jsonTextBytes (on a rune boundary, with a
// marker) and its full size: whole, the size it was recorded with (full,
// as evidence.Observation's TextBytes).
func cutText(s string, full int) (string, int) {
	if len(s) <= jsonTextBytes {
		return s, full
	}
	n := jsonTextBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if full == 0 {
		full = len(s)
	}
	return s[:n] + " … [cut in report.json: " + record.ResultsFile + " has it whole]", full
}

// JSON renders the report as one JSON document. The cells are encoded on
// every CPU and written in order, as the encoder would indent them in the
// whole document: a report of 10,000 cells is never held whole in memory.
func JSON(w io.Writer, rep *record.Report) error {
	known := map[string]string{}
	for _, r := range rep.Results {
		if st := statusText(rep, r); st != "" {
			known[r.Cell.ID] = st
		}
	}
	head, err := json.MarshalIndent(jsonReport{Run: rep.Run, Summary: rep.Summary(), ReferenceProblem: ReferenceProblem(rep), Judged: rep.JudgedNote, Agreement: rep.Agreement, AgreementChanges: rep.Changed,
		Causes: Clusters(rep), Blame: BlameOf(rep), Known: known, SameAs: SameAs(rep), Performance: PerformanceOf(rep), RawResults: record.ResultsFile, Cells: []record.Result{}}, "", "  ")
	if err != nil {
		return err
	}
	// head ends in `"cells": []` and the closing brace.
	const noCells = "[]\n}"
	if !bytes.HasSuffix(head, []byte(noCells)) {
		return fmt.Errorf("report.json: unexpected end of the document %q", head[max(0, len(head)-20):])
	}
	bw := bufio.NewWriter(w)
	bw.Write(head[:len(head)-len(noCells)])
	if len(rep.Results) == 0 {
		bw.WriteString(noCells + "\n")
		return bw.Flush()
	}
	bw.WriteString("[\n")
	err = record.WriteOrdered(bw, len(rep.Results), func(i int) ([]byte, error) {
		r := rep.Results[i]
		cell, err := json.MarshalIndent(jsonCell(r), "    ", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode cell %s: %w", r.Cell.ID, err)
		}
		sep := ",\n"
		if i == len(rep.Results)-1 {
			sep = "\n"
		}
		return append(append([]byte("    "), cell...), sep...), nil
	})
	if err != nil {
		return err
	}
	bw.WriteString("  ]\n}\n")
	return bw.Flush()
}

// clip shortens s to n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// plural is "1 cell" or "3 cells".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Formats are the report formats Render knows.
var Formats = []string{"table", "md", "html", "json", "csv", "junit", "known"}

// Render writes the report in a format; "table" has no colour (see
// TableWith).
func Render(format string, w io.Writer, rep *record.Report) error {
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
	case "known":
		return KnownTOML(w, rep)
	}
	return fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))
}
