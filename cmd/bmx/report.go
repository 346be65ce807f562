package main

import (
	"bufio"
	"fmt"
	goio "io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/cmd/bmx/internal/termstatus"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

type reportOptions struct {
	Format  string
	Output  string
	Rejudge bool
	// Baseline is an earlier run that --format known and junit judge
	// regressions against (and --fail-on's baseline words compare with).
	Baseline string
	// FailOn gates the run as sweep --fail-on does: exit 1 and the gate's
	// summary, and in --format junit every cell that trips it fails.
	FailOn []string
}

func newReportCmd(io iostreams) *cobra.Command {
	opts := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Render a run directory again, in any format",
		Long: `Read RUN/run.json and RUN/results.jsonl and render the report: a terminal
table, Markdown, a standalone HTML page, JSON, CSV, or JUnit XML (one test
case per cell, so CI systems show the matrix as tests). With --rejudge the
cells are classified again from their recorded evidence by this bmx.

--format known prints a [[known]] entry, ready to paste into the config, for
each failure no [[known]] entry covers (one for an axis value every cell of
which failed alike): sweep --fail-on unexpected fails until every failure
has one, and then only on what is new. With --baseline RUN it proposes no
entry over a cell correct in RUN and failing now: a regression is to be
fixed, not excused (--format junit fails such a cell as a regression).

--fail-on gates the run as sweep --fail-on does, for a job that renders a
run it did not sweep: exit 1 and the gate's summary on stderr, and with
--format junit every cell that trips it is a failing test case that says
why (a perf-regression included).`,
		Example: `  bmx report runs/20260310T120000Z-sm120 --format html -o sm120.html
  bmx report runs/20260310T120000Z-sm120 --format junit -o junit.xml
  bmx report runs/tonight --format junit -o junit.xml --baseline runs/last-night --fail-on unexpected,regression,perf-regression
  bmx report runs/20260310T120000Z-sm120 --format known --baseline runs/last-night >> matrix.toml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(reports.Formats, opts.Format) {
				return usageErrorf("--format %q: one of %s", opts.Format, strings.Join(reports.Formats, ", "))
			}
			words, err := reports.ParseGates(opts.FailOn)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			opts.FailOn = words
			gatedOnBase := false
			for _, v := range words {
				if reports.NeedsBaseline(v) {
					if opts.Baseline == "" {
						return usageErrorf("--fail-on %s needs --baseline RUN to compare with", v)
					}
					gatedOnBase = true
				}
			}
			if opts.Baseline != "" && opts.Format != "known" && opts.Format != "junit" && !gatedOnBase {
				return usageErrorf("--baseline goes with --format known or junit, or --fail-on's baseline words (bmx diff compares two runs)")
			}
			return runReport(args[0], opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", strings.Join(reports.Formats[:len(reports.Formats)-1], ", ")+" or "+reports.Formats[len(reports.Formats)-1])
	outFlag(cmd, &opts.Output, "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&opts.Rejudge, "rejudge", false, "classify the cells again from their recorded evidence")
	cmd.Flags().StringVar(&opts.Baseline, "baseline", "", "an earlier run directory: --format known proposes no entry over a cell correct there and failing now, --format junit fails it as a regression, --fail-on's baseline words compare with it")
	cmd.Flags().StringSliceVar(&opts.FailOn, "fail-on", nil, "exit 1 if a cell trips one of these (comma-separated; the words of sweep --fail-on), and fail those cells in --format junit: "+reports.GateUsage("--baseline RUN"))
	return cmd
}

func runReport(dir string, opts *reportOptions, io iostreams) error {
	if _, err := record.ReadRunDir(dir); err != nil {
		return withCode(ExitUsage, err)
	}
	limitLargeRunMemory(dir)
	rep, err := record.Load(dir)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// Gated against a baseline (which is always judged by this bmx), the
	// run is too: like is compared with like.
	rejudge := opts.Rejudge || opts.Baseline != "" && len(opts.FailOn) > 0
	noteJudged(io.Err, dir, rep.JudgeCurrent(rejudge), rejudge)
	var base *record.Report
	if opts.Baseline != "" {
		if base, err = record.Load(opts.Baseline); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--baseline %s: %w", opts.Baseline, err))
		}
		noteJudged(io.Err, opts.Baseline, base.JudgeCurrent(true), true)
	}
	var gate *reports.GateResult
	if len(opts.FailOn) > 0 {
		if gate, err = reports.Gate(rep, opts.FailOn, base); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	render := func(w goio.Writer) error {
		switch {
		case base != nil && opts.Format == "known":
			return reports.KnownTOMLWith(w, rep, base)
		case opts.Format == "junit" && (base != nil || gate != nil):
			return reports.JUnitGated(w, rep, base, gate)
		}
		return reports.Render(opts.Format, w, rep)
	}
	if err := writeReport(render, rep, opts, io); err != nil {
		return err
	}
	return showGate(gate, rep, base, io)
}

// writeReport renders the report to --output, or to stdout (the terminal
// table fitted to it).
func writeReport(render func(goio.Writer) error, rep *record.Report, opts *reportOptions, io iostreams) error {
	if opts.Output == "" {
		if opts.Format == "table" {
			return reports.TableWith(io.Out, rep, reports.TableOptions{Color: termstatus.ColorOK(io.Out), Width: termstatus.Width(io.Out)})
		}
		return render(io.Out)
	}
	if err := streamOutput(opts.Output, render); err != nil {
		return err
	}
	fmt.Fprintf(io.Err, "bmx: wrote %s\n", opts.Output)
	return nil
}

// streamOutput renders into the file path as it renders, not into memory
// first (report.json of 10,000 cells is 255 MB): into a temporary file
// renamed over path once whole, so a failed render leaves path as it was;
// a path that is no regular file (/dev/stdout, a pipe) is written directly.
// An error of writing is ExitInfra, one of rendering as it is.
func streamOutput(path string, render func(goio.Writer) error) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return withCode(ExitInfra, err)
		}
		bw := bufio.NewWriterSize(f, 64<<10)
		err = render(bw)
		if ferr := bw.Flush(); err == nil && ferr != nil {
			err = withCode(ExitInfra, ferr)
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			err = withCode(ExitInfra, cerr)
		}
		return err
	}
	var renderErr error
	err := record.WriteFileFunc(path, func(w goio.Writer) error {
		renderErr = render(w)
		return renderErr
	})
	switch {
	case renderErr != nil:
		return renderErr
	case err != nil:
		return withCode(ExitInfra, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return withCode(ExitInfra, err)
	}
	return nil
}
