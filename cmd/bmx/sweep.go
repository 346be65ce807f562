package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/cmd/bmx/internal/termstatus"
	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

type sweepOptions struct {
	configOptions
	Out    string
	FailOn []string
	Quiet  bool
	Slots  int
	Resume string
	Force  bool
	Shard  string
	// Baseline is an earlier run that --fail-on regression compares with
	// and the informative order prefers likely-working cells by.
	Baseline string
	// Order, Prune, PruneAfter and Confirm: see launcher.SessionOptions.
	Order      string
	Prune      bool
	PruneAfter int
	Confirm    bool
	// KeepGoing sweeps on when the first cell shows the setup broken.
	KeepGoing bool
	// Dedupe: see launcher.SessionOptions.
	Dedupe bool
	// JUnit is a file the finished sweep writes JUnit XML to.
	JUnit string
}

// defaultOut is where sweeps (and Slurm jobs) write their directories
// unless --out says otherwise; completion looks for runs there.
const defaultOut = "runs"

// newSweepCmd is bmx sweep; runF, when set, runs instead of runSweep (a
// test's view of the parsed options).
func newSweepCmd(io iostreams, runF func(context.Context, *sweepOptions) error) *cobra.Command {
	opts := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Start the server once per cell, probe it, and write a compatibility table",
		Long: `Sweep every cell of the matrix: start the server with the cell's flags, wait
for it to be ready, send the probe set, stop it, and classify the cell. Each
result is appended to <out>/<run>/results.jsonl as the cell ends; the server's
output goes to <out>/<run>/logs/<cell>.log; report.md, report.html and
report.json are written at the end and the table is printed (--junit FILE
writes JUnit XML too).

Cells run concurrently on GPU slots ([[slot]] in the config, or --slots N to
split the visible GPUs evenly); by default one slot has all GPUs. Ctrl-C
stops starting cells, tears down the running servers and keeps every finished
result; --resume DIR runs the cells that did not finish.

Cells start in the config's order unless order = "informative" in the config
(bmx init writes it) or --order informative: the reference first, then cells
that cover every axis value, likely-working ones first. Order changes which
cells run first, never a verdict.

--fail-on gates the run (exit 1, a summary on stderr): on verdicts, on what no
[[known]] entry covers (unexpected; bmx report RUN --format known prints the
entries to paste), on known issues that pass now (xpass), and against
--baseline RUN on regressions, fixes and performance, with the words bmx diff
--fail-on takes.

With no -c, sweeps the built-in simulated SM120 host (no GPU needed).`,
		Example: `  bmx sweep
  bmx sweep -c matrix.toml --var model=/models/Qwen3.5-397B-A17B-NVFP4 --slots 2
  bmx sweep -c matrix.toml --only moe_runner=flashinfer_cutlass --fail-on crash,nan,garbage
  bmx sweep -c matrix.toml --baseline runs/last-night --fail-on unexpected,regression --junit junit.xml
  bmx sweep --resume runs/20260310T120000Z-sm120`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSweepFlags(cmd, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSweep(cmd.Context(), opts, io)
		},
	}
	addSweepFlags(cmd, opts)
	return cmd
}

// addSweepFlags binds sweep's flags to opts.
func addSweepFlags(cmd *cobra.Command, opts *sweepOptions) {
	addConfigFlags(cmd, &opts.configOptions)
	outFlag(cmd, &opts.Out, defaultOut, "directory that holds run directories")
	cmd.Flags().StringSliceVar(&opts.FailOn, "fail-on", nil, "exit 1 if a cell trips one of these (comma-separated): "+reports.GateUsage("--baseline RUN"))
	cmd.Flags().StringVar(&opts.Baseline, "baseline", "", "an earlier run directory: --fail-on's baseline words and --junit compare with it, the informative order prefers its working cells, and when this run's cells choose no yardstick (the reference failed, or bmx cannot tell which group is right) they are judged against its verified one (same model and probe set)")
	cmd.Flags().StringVar(&opts.JUnit, "junit", "", "also write the report as JUnit XML to this file (a regression against --baseline is a failure that says what the cell was before)")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress on stderr")
	cmd.Flags().IntVar(&opts.Slots, "slots", 0, "run N cells at once, splitting the visible GPUs evenly (when the config has no [[slot]])")
	cmd.Flags().StringVar(&opts.Resume, "resume", "", "finish the run in this directory: skip the cells it finished")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "with --resume: resume even though the config changed since")
	cmd.Flags().StringVar(&opts.Order, "order", "", "start cells in this order: file (as the config lists them) or informative (the reference, then cells covering every axis value, likely-working first) (default: the config's order key; file when it has none, as the built-in sweep)")
	cmd.Flags().BoolVar(&opts.Prune, "prune", false, "do not start cells whose axis value already failed alike in --prune-after cells that differ in every other axis: record them as predicted (never correct; excluded from --fail-on and diff)")
	cmd.Flags().IntVar(&opts.PruneAfter, "prune-after", 0, "K for --prune (default: the config's prune_after, 2)")
	cmd.Flags().BoolVar(&opts.Confirm, "confirm", false, "with --resume: run the cells --prune predicted")
	cmd.Flags().BoolVar(&opts.KeepGoing, "keep-going", false, "sweep on when the first cell (the reference, when there is one) fails because the setup is broken (model not found, port taken, executable missing); without it the sweep stops there with exit 3")
	cmd.Flags().BoolVar(&opts.Dedupe, "dedupe", false, "do not start a cell that an \"auto\" cell resolved to (same backends, same command line otherwise): it inherits that cell's verdict, marked so; auto cells run first (as dedupe = true in the config)")
	cmd.Flags().StringVar(&opts.Shard, "shard", "", "run only shard i of n (0-based, e.g. $SLURM_ARRAY_TASK_ID/4) into its own run directory; merge the shards with bmx merge")
}

// checkSweepFlags refuses flag values, and combinations of flags, that
// cannot be right.
func checkSweepFlags(cmd *cobra.Command, opts *sweepOptions) error {
	words, err := reports.ParseGates(opts.FailOn)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	opts.FailOn = words
	for _, v := range opts.FailOn {
		if reports.NeedsBaseline(v) && opts.Baseline == "" {
			return usageErrorf("--fail-on %s needs --baseline RUN to compare with", v)
		}
	}
	if opts.JUnit != "" {
		// Checked before any server starts, as --baseline is: a typo in
		// the path must not cost the whole sweep.
		if err := checkOutputFile(opts.JUnit); err != nil {
			return usageErrorf("--junit %s: %v", opts.JUnit, err)
		}
	}
	if cmd.Flags().Changed("slots") && opts.Slots < 1 {
		return usageErrorf("--slots %d: want at least 1 (leave it out for one slot with all GPUs)", opts.Slots)
	}
	if err := checkConfigFlags(&opts.configOptions); err != nil {
		return err
	}
	if opts.Force && opts.Resume == "" {
		return usageErrorf("--force only applies to --resume")
	}
	if err := checkOrderFlags(opts); err != nil {
		return err
	}
	if opts.Shard != "" {
		if _, err := matrix.ParseShard(opts.Shard); err != nil {
			return usageErrorf("--shard %v", err)
		}
	}
	return nil
}

// checkOutputFile reports why a file cannot be written at path, as far as
// can be told before writing it: its directory does not exist or is not a
// directory, or path is a directory.
func checkOutputFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory: want a file")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// checkOrderFlags refuses combinations of order and pruning flags; the
// values of --order and --prune-after are the session's to check.
func checkOrderFlags(opts *sweepOptions) error {
	if opts.Confirm && opts.Resume == "" {
		return usageErrorf("--confirm only applies to --resume (it runs the cells --prune predicted)")
	}
	if opts.Confirm && opts.Prune {
		return usageErrorf("--confirm runs the predicted cells; it does not go with --prune")
	}
	return nil
}

func addConfigFlags(cmd *cobra.Command, o *configOptions) {
	cmd.Flags().StringVarP(&o.Config, "config", "c", "", "matrix file (default: the built-in simulated SM120 host)")
	cmd.Flags().StringArrayVar(&o.Vars, "var", nil, "set a [vars] placeholder, name=value (repeatable)")
	cmd.Flags().StringArrayVar(&o.Only, "only", nil, "run only cells with axis=value (repeatable)")
	cmd.Flags().IntVar(&o.MaxCells, "max-cells", matrix.DefaultMaxCells, "refuse a matrix of more cells than this, before building any")
}

// checkConfigFlags refuses flag values that cannot be right.
func checkConfigFlags(o *configOptions) error {
	if o.MaxCells < 1 {
		return usageErrorf("--max-cells %d: want at least 1", o.MaxCells)
	}
	return nil
}

func runSweep(ctx context.Context, opts *sweepOptions, io iostreams) error {
	so, err := sessionOptions(opts, io)
	if err != nil {
		return err
	}
	out, err := launcher.NewSession(so).Run(ctx)
	switch {
	case errors.Is(err, launcher.ErrInterrupted) && out == nil:
		return withCode(ExitInterrupted, errors.New("interrupted before any cell started"))
	case errors.Is(err, launcher.ErrInterrupted) && launcher.RunDirGone(out.Dir):
		return withCode(ExitInterrupted, errors.New("interrupted; the run directory was removed: nothing of this run is kept"))
	case errors.Is(err, launcher.ErrInterrupted):
		fmt.Fprintf(io.Err, "bmx: interrupted: %d of %d cells are done and kept in %s\nbmx: to run the rest: bmx sweep --resume %s\n",
			len(out.Report.Results), out.Report.Run.Cells, out.Dir, out.Dir)
		return withCode(ExitInterrupted, errSilent)
	case errors.As(err, new(*launcher.ConfigError)):
		return withCode(ExitUsage, err)
	case err != nil:
		return withCode(ExitInfra, err)
	}
	return showSweep(out, opts, io)
}

// sessionOptions are the session a sweep's options ask for.
func sessionOptions(opts *sweepOptions, io iostreams) (launcher.SessionOptions, error) {
	vars, err := parseVars(opts.Vars)
	if err != nil {
		return launcher.SessionOptions{}, err
	}
	var shard matrix.Shard // checked by checkSweepFlags
	if opts.Shard != "" {
		shard, _ = matrix.ParseShard(opts.Shard)
	}
	so := launcher.SessionOptions{
		Config: opts.Config, Vars: vars, Only: opts.Only, MaxCells: opts.MaxCells, Out: opts.Out, Resume: opts.Resume, Force: opts.Force,
		Slots: opts.Slots, Self: selfExecutable(), Version: Version,
		Log: log.New(io.Err, "bmx: ", 0), WriteReports: writeRunFiles, Blamed: reports.Blamed, Shard: shard,
		Order: opts.Order, Prune: opts.Prune, PruneAfter: opts.PruneAfter, Confirm: opts.Confirm, Baseline: opts.Baseline,
		KeepGoing: opts.KeepGoing, Dedupe: opts.Dedupe,
	}
	if opts.Baseline != "" {
		// report.md's news counts what is new since the baseline, as the
		// gate's summary does. A baseline that does not load is the
		// session's to refuse.
		if base, err := record.Load(opts.Baseline); err == nil {
			so.WriteReports = func(dir string, rep *record.Report) error { return reports.WriteFilesWith(dir, rep, base) }
		}
	}
	if !opts.Quiet {
		// Notes go through the progress display, which clears its status
		// line before each.
		p := termstatus.NewProgress(io.Err)
		so.Progress, so.Log = p, log.New(p, "bmx: ", 0)
	}
	return so, nil
}

// showSweep prints a finished sweep's table, adds it to a GitHub job summary,
// writes --junit and applies --fail-on.
func showSweep(out *launcher.Outcome, opts *sweepOptions, io iostreams) error {
	rep := out.Report
	if rep.Dir == "" {
		rep.Dir = out.Dir
	}
	if err := reports.TableWith(io.Out, rep, reports.TableOptions{Color: termstatus.ColorOK(io.Out), Width: termstatus.Width(io.Out)}); err != nil {
		return withCode(ExitInfra, err)
	}
	if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
		if err := appendSummary(path, rep, out.Baseline); err != nil {
			fmt.Fprintf(io.Err, "bmx: GITHUB_STEP_SUMMARY: %v\n", err)
		}
	}
	fmt.Fprintf(io.Err, "\nbmx: run directory %s (%s)\n", out.Dir, runFiles)
	var gate *reports.GateResult
	if len(opts.FailOn) > 0 {
		g, err := reports.Gate(rep, opts.FailOn, out.Baseline)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		gate = g
	}
	if opts.JUnit != "" {
		if err := writeJUnit(opts.JUnit, rep, out.Baseline, gate); err != nil {
			return withCode(ExitInfra, err)
		}
		fmt.Fprintf(io.Err, "bmx: wrote %s\n", opts.JUnit)
	}
	return showGate(gate, rep, out.Baseline, io)
}

// runFiles are what a run directory holds, as a sweep's last line says.
const runFiles = "results.jsonl, report.md, report.html, report.json, logs/"

// writeJUnit writes the run's JUnit XML to path, judged against baseline
// (nil: none); each cell that fails the gate (nil: none) fails there.
func writeJUnit(path string, rep, baseline *record.Report, gate *reports.GateResult) error {
	var buf bytes.Buffer
	if err := reports.JUnitGated(&buf, rep, baseline, gate); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}

// applyGate checks --fail-on's words against rep (and baseline, nil when
// there is none) and, when a cell trips them, prints the gate's summary
// and returns exit 1.
func applyGate(rep *record.Report, words []string, baseline *record.Report, io iostreams) error {
	if len(words) == 0 {
		return nil
	}
	g, err := reports.Gate(rep, words, baseline)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	return showGate(g, rep, baseline, io)
}

// showGate prints a failed gate's summary (g nil or passed: nothing) and
// returns exit 1: on a terminal each line fitted to its width, elsewhere
// (a CI log) whole; the first reports.GateListMax cells, then how many
// more and where every cell's verdict is.
func showGate(g *reports.GateResult, rep, baseline *record.Report, io iostreams) error {
	if g == nil || !g.Failed() {
		return nil
	}
	const prefix = "bmx: "
	o := reports.SummaryOptions{Max: reports.GateListMax, Rest: gateRest(rep, baseline)}
	if w := termstatus.LineWidth(io.Err); w > 0 {
		o.Width = max(w-len(prefix), 20)
	}
	for _, l := range g.Summary(o) {
		fmt.Fprintln(io.Err, prefix+l)
	}
	return withCode(ExitFailed, errSilent)
}

// gateRest says where the cells a gate's summary leaves out are: the
// run's report.md (every cell's verdict and known status) and, against a
// baseline, the diff that lists every change.
func gateRest(rep, baseline *record.Report) string {
	if rep.Dir == "" {
		return ""
	}
	s := filepath.Join(rep.Dir, reports.MarkdownFile) + " (every cell, its verdict and known status)"
	if baseline != nil && baseline.Dir != "" {
		s += "; bmx diff " + baseline.Dir + " " + rep.Dir + " (every change since the baseline)"
	}
	return s
}

// appendSummary adds the Markdown report to a GitHub Actions job summary,
// its news against baseline (nil: none) as the gate's.
func appendSummary(path string, rep, baseline *record.Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := reports.MarkdownSummaryWith(f, rep, baseline); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// selfExecutable is the bmx binary, for {self} in server commands.
func selfExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}
