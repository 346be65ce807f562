package reports

import (
	"fmt"
	"io"
	"regexp"

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

// Table renders the terminal report: for two axes a verdict grid, then one
// line per cell with the evidence that decided it.
func Table(w io.Writer, rep *Report) error {
	title := "bmx: " + rep.Run.Name
	if rep.Run.Simulated {
		title += " (SIMULATED host: no real GPU or server was used)"
	}
	fmt.Fprintf(w, "%s\n%s\nhost: %s\n\n", title, rep.SummaryLine(), Clean(rep.Run.Host.Summary()))
	if p := rep.ReferenceProblem(); p != "" {
		fmt.Fprintf(w, "WARNING: %s\n\n", Clean(p))
	}
	if g, ok := rep.grid(); ok {
		header := []string{g.rowAxis + ` \ ` + g.colAxis}
		header = append(header, g.cols...)
		t := newTable(w, header)
		for _, row := range g.rows {
			line := []string{row}
			for _, col := range g.cols {
				line = append(line, g.at(row, col))
			}
			if err := t.Append(line); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	header := []string{"cell", "verdict", "evidence", "signature", "ready"}
	if len(rep.Run.Known) > 0 {
		header = append(header, "known")
	}
	t := newTable(w, header)
	for _, r := range rep.Results {
		row := []string{Clean(r.Cell.ID), string(r.Verdict), clip(Clean(r.Reason), 70), clip(Clean(r.Signature), 60), readyText(r)}
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
