package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/launcher"
	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/reports"
)

type sweepOptions struct {
	configOptions
	Out    string
	FailOn []string
	Quiet  bool
	Slots  int
	Resume string
	Force  bool
}

func newSweepCmd(io iostreams) *cobra.Command {
	opts := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Start the server once per cell, probe it, and write a compatibility table",
		Long: `Sweep every cell of the matrix: start the server with the cell's flags, wait
for it to be ready, send the probe set, stop it, and classify the cell. Each
result is appended to <out>/<run>/results.jsonl as the cell ends; the server's
output goes to <out>/<run>/logs/<cell>.log; report.md and report.json are
written at the end and the table is printed.

Cells run concurrently on GPU slots ([[slot]] in the config, or --slots N to
split the visible GPUs evenly); by default one slot has all GPUs. Ctrl-C
stops starting cells, tears down the running servers and keeps every finished
result; --resume DIR runs the cells that did not finish.

With no -c, sweeps the built-in simulated SM120 host (no GPU needed).`,
		Example: `  bmx sweep
  bmx sweep -c matrix.toml --var model=/models/Qwen3.5-397B-A17B-NVFP4 --slots 2
  bmx sweep -c matrix.toml --only moe_runner=flashinfer_cutlass --fail-on crash,nan,garbage
  bmx sweep --resume runs/20260310T120000Z-sm120`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, v := range opts.FailOn {
				if !classify.Verdict(v).Valid() {
					return usageErrorf("--fail-on %q: not a verdict (one of %s)", v, verdictList())
				}
			}
			if opts.Slots < 0 {
				return usageErrorf("--slots %d: want at least 1", opts.Slots)
			}
			if opts.Force && opts.Resume == "" {
				return usageErrorf("--force only applies to --resume")
			}
			return runSweep(cmd.Context(), opts, io)
		},
	}
	addConfigFlags(cmd, &opts.configOptions)
	cmd.Flags().StringVar(&opts.Out, "out", "runs", "directory that holds run directories")
	cmd.Flags().StringSliceVar(&opts.FailOn, "fail-on", nil, "exit 1 if any cell gets one of these verdicts (comma-separated)")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress on stderr")
	cmd.Flags().IntVar(&opts.Slots, "slots", 0, "run N cells at once, splitting the visible GPUs evenly (when the config has no [[slot]])")
	cmd.Flags().StringVar(&opts.Resume, "resume", "", "finish the run in this directory: skip the cells it finished")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "with --resume: resume even though the config changed since")
	return cmd
}

func addConfigFlags(cmd *cobra.Command, o *configOptions) {
	cmd.Flags().StringVarP(&o.Config, "config", "c", "", "matrix file (default: the built-in simulated SM120 host)")
	cmd.Flags().StringArrayVar(&o.Vars, "var", nil, "set a [vars] placeholder, name=value (repeatable)")
	cmd.Flags().StringArrayVar(&o.Only, "only", nil, "run only cells with axis=value (repeatable)")
}

func verdictList() string {
	var vs []string
	for _, v := range append(slices.Clone(classify.Verdicts), classify.Skipped) {
		vs = append(vs, string(v))
	}
	return strings.Join(vs, ", ")
}

func runSweep(ctx context.Context, opts *sweepOptions, io iostreams) error {
	var prev *reports.Run
	if opts.Resume != "" {
		var err error
		if prev, err = reports.ReadRun(opts.Resume); err != nil {
			return usageErrorf("--resume %s: not a bmx run directory: %w", opts.Resume, err)
		}
		if opts.Config == "" && prev.ConfigPath != matrix.BuiltinName {
			opts.Config = prev.ConfigPath
		}
		// The run's own vars, then any given now.
		vars := opts.Vars
		opts.Vars = nil
		for _, k := range slices.Sorted(maps.Keys(prev.Vars)) {
			if prev.Vars[k] != matrix.Redacted { // a secret must be given again
				opts.Vars = append(opts.Vars, k+"="+prev.Vars[k])
			}
		}
		opts.Vars = append(opts.Vars, vars...)
		if len(opts.Only) == 0 {
			opts.Only = prev.Only
		}
	}
	cfg, plan, err := opts.load(io.Err)
	if err != nil {
		return err
	}
	set, err := loadProbes(cfg)
	if err != nil {
		return err
	}
	slots := cfg.Slots
	if len(slots) == 0 && opts.Slots > 0 {
		gpus := launcher.VisibleGPUs(ctx, cfg.GPU, os.Getenv("CUDA_VISIBLE_DEVICES"))
		if slots, err = launcher.SplitSlots(gpus, opts.Slots); err != nil {
			return withCode(ExitUsage, err)
		}
	}

	cells := plan.Cells
	var prior []reports.Result
	var notes []string
	out := opts.Out
	if prev != nil {
		out = filepath.Dir(opts.Resume)
		if matrix.RedactSource(cfg.Source) != prev.Config || !maps.Equal(matrix.RedactVars(cfg.Vars), prev.Vars) {
			if !opts.Force {
				return usageErrorf("--resume %s: the config (%s) or its vars changed since the run started; resume anyway with --force, or start a new sweep", opts.Resume, cfg.Path)
			}
			notes = append(notes, "resumed with --force after the config changed")
		}
		var torn bool
		if prior, torn, err = reports.RecoverResults(opts.Resume); err != nil {
			return withCode(ExitInfra, err)
		}
		if torn {
			notes = append(notes, "the last line of results.jsonl was torn (bmx was killed while writing it); that cell runs again")
		}
		prior = slices.DeleteFunc(prior, func(r reports.Result) bool { return r.Verdict == classify.Skipped })
		done := map[string]bool{}
		for _, r := range prior {
			done[r.Cell.ID] = true
		}
		cells = slices.DeleteFunc(slices.Clone(cells), func(c matrix.Cell) bool { return done[c.ID] })
	}

	if cfg.HelpCheck {
		flags, err := launcher.HelpFlags(ctx, cfg, selfExecutable())
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("help_check: %w", err))
		}
		if errs := cfg.CheckChoices(flags, &matrix.Plan{Cells: cells}); len(errs) > 0 {
			for _, e := range errs {
				fmt.Fprintf(io.Err, "bmx: help_check: %v\n", e)
			}
			return withCode(ExitUsage, errSilent)
		}
	}
	if errs := launcher.Preflight(cfg, cells, slots, selfExecutable(), out); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(io.Err, "bmx: preflight: %v\n", e)
		}
		return withCode(ExitUsage, errSilent)
	}

	started := time.Now().UTC()
	var dir string
	run := newRun(cfg, plan, set.Name, slots, started)
	run.Host = launcher.Fingerprint(ctx, cfg, selfExecutable())
	run.Only = opts.Only
	run.Reference, run.Known = plan.Reference, cfg.Known
	if prev != nil {
		dir = opts.Resume
		run.Started, run.Resumed = prev.Started, prev.Resumed+1
		run.Notes = append(prev.Notes, notes...)
		if n := launcher.KillMarked(filepath.Base(dir) + "/"); n > 0 {
			run.Notes = append(run.Notes, fmt.Sprintf("killed %d leftover processes of the earlier attempt", n))
		}
		fmt.Fprintf(io.Err, "bmx: resuming %s: %d cells done, %d to run\n", dir, len(prior), len(cells))
	} else {
		if dir, err = reports.CreateRunDir(out, cfg.Name, started); err != nil {
			return withCode(ExitInfra, err)
		}
		fmt.Fprintf(io.Err, "bmx: sweeping %d cells of %s on %d slot(s) into %s\n", len(cells), cfg.Name, max(len(slots), 1), dir)
	}
	if err := reports.WriteRun(dir, run); err != nil {
		return withCode(ExitInfra, fmt.Errorf("write run.json: %w", err))
	}
	store, err := reports.OpenStore(dir)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	defer store.Close()

	sw := &launcher.Sweep{Config: cfg, Probes: set, Self: selfExecutable(), Dir: dir, Store: store, Slots: slots, Reference: plan.Reference}
	for _, r := range prior {
		if r.Cell.ID == plan.Reference {
			sw.Ref = r.AsReference()
		}
	}
	var prog *progress
	if !opts.Quiet {
		prog = newProgress(io.Err, len(cells), max(len(slots), 1))
		sw.OnStart, sw.OnCell = prog.start, prog.done
		defer prog.stop()
	}
	results, sweepErr := sw.Run(ctx, cells)
	if prog != nil {
		prog.stop()
	}

	run.Ended = time.Now().UTC()
	run.Interrupted = errors.Is(sweepErr, launcher.ErrInterrupted)
	run.Notes = append(run.Notes, sw.Notes()...)
	for _, n := range sw.Notes() {
		fmt.Fprintf(io.Err, "bmx: note: %s\n", n)
	}
	rep := &reports.Report{Run: run, Results: inPlanOrder(plan.Cells, append(prior, results...))}
	if err := reports.WriteRun(dir, run); err != nil {
		return withCode(ExitInfra, fmt.Errorf("write run.json: %w", err))
	}
	if err := reports.WriteFiles(dir, rep); err != nil {
		return withCode(ExitInfra, err)
	}
	switch {
	case run.Interrupted:
		fmt.Fprintf(io.Err, "bmx: interrupted: %d of %d cells are done and kept in %s\nbmx: to run the rest: bmx sweep --resume %s\n",
			len(rep.Results), len(plan.Cells), dir, dir)
		return withCode(ExitInterrupted, errSilent)
	case sweepErr != nil:
		return withCode(ExitInfra, fmt.Errorf("%w (results so far are in %s)", sweepErr, dir))
	}
	if err := reports.TableWith(io.Out, rep, reports.TableOptions{Color: colorOK(io.Out)}); err != nil {
		return withCode(ExitInfra, err)
	}
	if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
		if err := appendSummary(path, rep); err != nil {
			fmt.Fprintf(io.Err, "bmx: GITHUB_STEP_SUMMARY: %v\n", err)
		}
	}
	fmt.Fprintf(io.Err, "\nbmx: run directory %s (results.jsonl, report.md, report.html, report.json, logs/)\n", dir)
	var failed []string
	for _, r := range rep.Results {
		if slices.Contains(opts.FailOn, string(r.Verdict)) {
			failed = append(failed, r.Cell.ID+": "+string(r.Verdict))
		}
	}
	if len(failed) > 0 {
		return withCode(ExitFailed, fmt.Errorf("--fail-on: %d cells failed: %s", len(failed), strings.Join(failed, "; ")))
	}
	return nil
}

// appendSummary adds the Markdown report to a GitHub Actions job summary.
func appendSummary(path string, rep *reports.Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := reports.MarkdownSummary(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// inPlanOrder orders results as the plan lists their cells, the latest
// result of a cell winning; cells of an earlier plan come last.
func inPlanOrder(cells []matrix.Cell, results []reports.Result) []reports.Result {
	latest := map[string]reports.Result{}
	var extra []string
	for _, r := range results {
		if _, ok := latest[r.Cell.ID]; !ok && !slices.ContainsFunc(cells, func(c matrix.Cell) bool { return c.ID == r.Cell.ID }) {
			extra = append(extra, r.Cell.ID)
		}
		latest[r.Cell.ID] = r
	}
	var out []reports.Result
	for _, c := range cells {
		if r, ok := latest[c.ID]; ok {
			out = append(out, r)
		}
	}
	for _, id := range extra {
		out = append(out, latest[id])
	}
	return out
}

func newRun(cfg *matrix.Config, plan *matrix.Plan, probeSet string, slots []matrix.Slot, started time.Time) *reports.Run {
	run := &reports.Run{
		Name: cfg.Name, Simulated: cfg.Path == matrix.BuiltinName, BMXVersion: Version(),
		ConfigPath: cfg.Path, Config: matrix.RedactSource(cfg.Source), Vars: matrix.RedactVars(cfg.Vars), ProbeSet: probeSet,
		Cells: len(plan.Cells), Excluded: plan.Excluded,
		Started: started,
	}
	if abs, err := filepath.Abs(cfg.Path); err == nil && cfg.Path != matrix.BuiltinName {
		run.ConfigPath = abs
	}
	for _, s := range slots {
		run.Slots = append(run.Slots, s.GPUs)
	}
	for _, a := range cfg.Axes {
		av := reports.AxisValues{Name: a.Name}
		for _, v := range a.Values {
			av.Values = append(av.Values, v.Name)
		}
		run.Axes = append(run.Axes, av)
	}
	if run.Excluded == nil {
		run.Excluded = []matrix.Cell{}
	}
	return run
}

// selfExecutable is the bmx binary, for {self} in server commands.
func selfExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}
