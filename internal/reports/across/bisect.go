// Package across renders what bmx knows across runs rather than within one:
// a bisect's steps and finding, each cell's history over many runs
// (terminal, Markdown, JSON, HTML with a small inline-SVG chart per cell),
// and the published support matrix, a static site of many hosts' latest
// runs with an evidence page per cell. It reads runs through package record
// and never runs anything.
package across

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bmx-dev/bmx/internal/record"
)

// Bisect writes a bisect's steps and its finding (or where it stands, when
// it is not done) as plain text.
func Bisect(w io.Writer, b *record.Bisect) error {
	by := "a verdict change"
	if b.Mode == record.BisectPerf {
		by = "a performance drop"
	}
	fmt.Fprintf(w, "bisect of %s along %s (%d values, %s to %s), on %s\n\n", b.Cell, b.Along, len(b.Values), b.Values[0], b.Values[len(b.Values)-1], by)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\t%s\tverdict\ttok/s\tside\twhy\n", b.Along)
	for i, s := range b.Steps {
		tps := "-"
		if s.TokensPerS > 0 {
			tps = fmt.Sprintf("%.1f", s.TokensPerS)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, s.Value, s.Verdict, tps, s.Side, oneLine(s.Why, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch f := b.Finding; {
	case f == nil:
		fmt.Fprintf(w, "not done: %d cell runs so far\n", b.Runs)
	case len(f.Candidates) > 0:
		fmt.Fprintf(w, "first bad: one of %s=%s (skipped values between)\n%s\n%d cell runs\n", b.Along, strings.Join(f.Candidates, ","), f.Text, b.Runs)
	default:
		fmt.Fprintf(w, "first bad: %s=%s (last good: %s)\n%s\n%d cell runs\n", b.Along, f.FirstBad, f.LastGood, f.Text, b.Runs)
	}
	return nil
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
