package main

import (
	"bytes"
	"fmt"
	goio "io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports/across"
)

type historyOptions struct {
	Format string
	Output string
}

func newHistoryCmd(io iostreams) *cobra.Command {
	opts := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history RUN...",
		Short: "Each cell over many runs: its verdicts in time order, its last change, its speed trend",
		Long: `Follow each cell through run directories (any order; they are put in the
order they started), one history per config and host, each titled: its
verdicts as a strip of the
HTML report's glyphs, when it last changed and to what (with the host
fingerprint's changes between those two runs: torch, CUDA, driver, engine),
and its speed (tok/s per request and TTFT at concurrency 1, with the spread
of the latest run; a change by the perf gate's rule is named). A cell that
went back to a verdict it had left is named flaky. A run whose own cells
chose no yardstick is judged against the latest earlier run's verified one
(same model and probe set); a correct after a failure against a yardstick
that nothing could judge is drawn ◇ (yardstick lost), not as a fix.

A path that is not a run is skipped with a note on stderr. Each run is
read through its summary (summary.jsonl beside it, made from a full read
when missing or out of date), so a year of runs reads bytes per cell. A run that was
interrupted or stopped on a broken setup counts only the cells it finished:
the rest are absent (·), and its setup crashes are no verdicts. Cells an
older classifier judged are judged again with this bmx's, and the run says
so.

Formats: table (the terminal), md, json, html (a page with a small chart
per cell, inline SVG, no scripts); json is an array, one history per group.`,
		Example: `  bmx history runs/*
  bmx history runs/2026031* --format html -o history.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(across.HistoryFormats, opts.Format) {
				return usageErrorf("--format %q: one of %s", opts.Format, strings.Join(across.HistoryFormats, ", "))
			}
			return runHistory(args, opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", "table, md, json or html")
	outFlag(cmd, &opts.Output, "", "write to this file instead of stdout")
	return cmd
}

// loadRuns loads the run directories among paths, for the readers across
// runs (history, publish), as summaries (record.LoadSummary: bytes per
// cell, made from a full read once and kept beside the run). A path that
// is not a run (a stray file, a folder of something else, a run that
// cannot be read) is skipped with one line on stderr saying why, so a glob
// over a folder of runs works; when none is a run, the first one's error
// is the error. Cells an older classifier judged are judged again with
// this bmx's, and stderr says so (noteJudged), as the pages and tables do.
func loadRuns(paths []string, io iostreams) ([]*record.Summary, error) {
	var sums []*record.Summary
	var skipped []error
	for _, p := range paths {
		s, err := record.LoadSummary(p)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		noteJudged(io.Err, p, s.Judged, true)
		sums = append(sums, s)
	}
	if len(sums) == 0 {
		err := skipped[0]
		if len(skipped) > 1 {
			err = fmt.Errorf("%w (and %d more paths, none a run)", err, len(skipped)-1)
		}
		return nil, withCode(ExitUsage, err)
	}
	for _, err := range skipped {
		fmt.Fprintf(io.Err, "bmx: note: skipped: %v\n", err)
	}
	return sums, nil
}

func runHistory(paths []string, opts *historyOptions, io iostreams) error {
	sums, err := loadRuns(paths, io)
	if err != nil {
		return err
	}
	hs, err := across.HistoriesOf(sums)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	render := func(w goio.Writer) error {
		if err := across.RenderHistories(w, hs, opts.Format); err != nil {
			return withCode(ExitInfra, err)
		}
		return nil
	}
	if opts.Output == "" {
		var buf bytes.Buffer
		if err := render(&buf); err != nil {
			return err
		}
		_, err := io.Out.Write(buf.Bytes())
		return err
	}
	if err := streamOutput(opts.Output, render); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	fmt.Fprintf(io.Err, "bmx: wrote %s\n", opts.Output)
	return nil
}
