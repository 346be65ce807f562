package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
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

With no -c, sweeps the built-in simulated SM120 host (no GPU needed).`,
		Example: `  bmx sweep
  bmx sweep -c matrix.toml --var model=/models/Qwen3.5-397B-A17B-NVFP4
  bmx sweep -c matrix.toml --only moe_runner=flashinfer_cutlass --fail-on crash,nan,garbage`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, v := range opts.FailOn {
				if !classify.Verdict(v).Valid() {
					return usageErrorf("--fail-on %q: not a verdict (one of %s)", v, verdictList())
				}
			}
			return runSweep(cmd.Context(), opts, io)
		},
	}
	addConfigFlags(cmd, &opts.configOptions)
	cmd.Flags().StringVar(&opts.Out, "out", "runs", "directory that holds run directories")
	cmd.Flags().StringSliceVar(&opts.FailOn, "fail-on", nil, "exit 1 if any cell gets one of these verdicts (comma-separated)")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "no per-cell lines on stderr")
	return cmd
}

func addConfigFlags(cmd *cobra.Command, o *configOptions) {
	cmd.Flags().StringVarP(&o.Config, "config", "c", "", "matrix file (default: the built-in simulated SM120 host)")
	cmd.Flags().StringArrayVar(&o.Vars, "var", nil, "set a [vars] placeholder, name=value (repeatable)")
	cmd.Flags().StringArrayVar(&o.Only, "only", nil, "run only cells with axis=value (repeatable)")
}

func verdictList() string {
	var vs []string
	for _, v := range classify.Verdicts {
		vs = append(vs, string(v))
	}
	return strings.Join(vs, ", ")
}

func runSweep(ctx context.Context, opts *sweepOptions, io iostreams) error {
	cfg, plan, err := opts.load(io.Err)
	if err != nil {
		return err
	}
	set, err := loadProbes(cfg)
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	dir, err := reports.CreateRunDir(opts.Out, cfg.Name, started)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	run := newRun(cfg, plan, set.Name, started)
	if err := reports.WriteRun(dir, run); err != nil {
		return withCode(ExitInfra, fmt.Errorf("write run.json: %w", err))
	}
	store, err := reports.OpenStore(dir)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	defer store.Close()

	fmt.Fprintf(io.Err, "bmx: sweeping %d cells of %s into %s\n", len(plan.Cells), cfg.Name, dir)
	sw := &launcher.Sweep{Config: cfg, Probes: set, Self: selfExecutable(), Dir: dir, Store: store}
	if !opts.Quiet {
		sw.OnCell = func(i, n int, r reports.Result) {
			fmt.Fprintf(io.Err, "[%*d/%d] %-8s %s (%.1fs)\n", len(fmt.Sprint(n)), i+1, n, r.Verdict, reports.Clean(r.Cell.ID), float64(r.Timings.TotalMS)/1000)
		}
	}
	results, sweepErr := sw.Run(ctx, plan.Cells)

	run.Ended = time.Now().UTC()
	run.Interrupted = errors.Is(sweepErr, launcher.ErrInterrupted)
	rep := &reports.Report{Run: run, Results: results}
	if err := reports.WriteRun(dir, run); err != nil {
		return withCode(ExitInfra, fmt.Errorf("write run.json: %w", err))
	}
	if err := reports.WriteFiles(dir, rep); err != nil {
		return withCode(ExitInfra, err)
	}
	switch {
	case run.Interrupted:
		fmt.Fprintf(io.Err, "bmx: interrupted after %d of %d cells; their results are kept in %s\n", len(results), len(plan.Cells), dir)
		return withCode(ExitInterrupted, errSilent)
	case sweepErr != nil:
		return withCode(ExitInfra, fmt.Errorf("%w (results so far are in %s)", sweepErr, dir))
	}
	if err := reports.Table(io.Out, rep); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintf(io.Err, "\nbmx: run directory %s (results.jsonl, report.md, report.json, logs/)\n", dir)
	var failed []string
	for _, r := range results {
		if slices.Contains(opts.FailOn, string(r.Verdict)) {
			failed = append(failed, r.Cell.ID+": "+string(r.Verdict))
		}
	}
	if len(failed) > 0 {
		return withCode(ExitFailed, fmt.Errorf("--fail-on: %d cells failed: %s", len(failed), strings.Join(failed, "; ")))
	}
	return nil
}

func newRun(cfg *matrix.Config, plan *matrix.Plan, probeSet string, started time.Time) *reports.Run {
	host, _ := os.Hostname()
	run := &reports.Run{
		Name: cfg.Name, Simulated: cfg.Path == matrix.BuiltinName, BMXVersion: Version(),
		ConfigPath: cfg.Path, Config: cfg.Source, Vars: cfg.Vars, ProbeSet: probeSet,
		Cells: len(plan.Cells), Excluded: plan.Excluded,
		Host:    reports.Host{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()},
		Started: started,
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
