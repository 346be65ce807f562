package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

type diffOptions struct {
	Format string
	FailOn []string
	Out    string
}

func newDiffCmd(io iostreams) *cobra.Command {
	opts := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff BASE NEW",
		Short: "Compare two runs: config changes, verdict flips per cell and host fingerprint changes",
		Long: `Compare two run directories of the same matrix, e.g. before and after a
nightly upgrade: each cell whose verdict flipped (correct -> garbage is a
regression, crash -> correct a fix, "fix (xpass)" when a [[known]] entry
covers the cell, other changes, new and removed cells),
every difference in the host fingerprint (GPU, driver, CUDA, package
versions) and in the config each run recorded, one line per change: axes
and their values, the server command and environment, vars, excludes and
includes, the probe set, the reference cell and the known issues (secrets
are compared and shown redacted; "config: unchanged" when none).

When NEW's own cells chose no yardstick (its reference failed and no group
of agreeing cells replaced it, or bmx cannot tell which group is right),
NEW is judged against BASE's verified yardstick where BASE has one for the
same model and probe set. A cell degraded or wrong in BASE only against
its yardstick and correct in NEW on its own is "yardstick lost", never a
fix: the line says what it is against BASE's yardstick, or that nothing
judges it.

--fail-on takes the words of sweep --fail-on, BASE as the baseline: a
verdict, unexpected and xpass judge NEW; regression, fix, changed, new,
removed, perf-regression and perf-improvement compare NEW with BASE. Exit 1
when a cell trips one (default: regression), with a summary on stderr; 0
otherwise.`,
		Example: `  bmx diff runs/before runs/after
  bmx diff runs/before runs/after --format md --fail-on regression,xpass,unexpected`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"table", "md", "json"}, opts.Format) {
				return usageErrorf("--format %q: one of table, md, json", opts.Format)
			}
			words, err := reports.ParseGates(opts.FailOn)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			opts.FailOn = words
			return runDiff(args[0], args[1], opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", "table, md or json")
	outFlag(cmd, &opts.Out, "", "write the comparison to this file instead of stdout")
	cmd.Flags().StringSliceVar(&opts.FailOn, "fail-on", []string{reports.Regression}, "exit 1 if a cell of NEW trips one of these (comma-separated; the words of sweep --fail-on): "+reports.GateUsage("BASE"))
	return cmd
}

func runDiff(basePath, newPath string, opts *diffOptions, io iostreams) error {
	base, err := record.Load(basePath)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	next, err := record.Load(newPath)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// Verdicts of another classifier would show its changes as flips:
	// both runs are compared as this bmx judges them.
	for _, side := range []struct {
		path string
		rep  *record.Report
	}{{basePath, base}, {newPath, next}} {
		noteJudged(io.Err, side.path, side.rep.JudgeCurrent(true), true)
	}
	d := reports.Compare(base, next)
	w := io.Out
	var buf bytes.Buffer
	if opts.Out != "" {
		w = &buf
	}
	switch opts.Format {
	case "md":
		err = reports.DiffMarkdown(w, d)
	case "json":
		err = reports.DiffJSON(w, d)
	default:
		err = reports.DiffTable(w, d)
	}
	if err != nil {
		return err
	}
	if opts.Out != "" {
		if err := os.WriteFile(opts.Out, buf.Bytes(), 0o644); err != nil {
			return withCode(ExitInfra, err)
		}
		fmt.Fprintf(io.Err, "bmx: wrote %s\n", opts.Out)
	}
	return applyGate(next, opts.FailOn, base, io)
}
