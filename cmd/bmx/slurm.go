package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/cmd/bmx/internal/termstatus"
	"github.com/bmx-dev/bmx/internal/launcher/slurm"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/reports"
)

type slurmOptions struct {
	configOptions
	Nodes       int
	Partition   string
	GPUsPerNode int
	Time        string
	Out         string
	Submit      bool
	DryRun      bool
	Follow      string
	Resume      string
	Shards      []int
	Poll        time.Duration
	Bmx         string
	Quiet       bool
	// Written is a job directory written without --submit, to submit now
	// (bmx slurm --submit DIR).
	Written string
}

func newSlurmCmd(io iostreams) *cobra.Command {
	opts := &slurmOptions{}
	cmd := &cobra.Command{
		Use:   "slurm [-c matrix.toml] --nodes N [--submit] | --submit JOBDIR",
		Short: "Spread a sweep over a Slurm cluster: a job array of shards and a merge",
		Long: `Split the matrix into N shards (bmx sweep --shard i/N) and write an sbatch
job array, one task and one node per shard, plus a merge job that waits for
the array to end (afterany) and makes the shards one run (bmx merge). The job
directory (under --out) holds both scripts, job.json, each shard's run, Slurm's
output and the merged run; it must be on a filesystem every node sees, as must
bmx itself (--bmx) and the config.

Each task asks for --gpus-per-task GPUs: those the config's [[slot]]s name, or
without slots --gpus-per-node (a cell gets all of them). The reference cell
runs in every shard, so each shard judges its cells against its own run of it.

--submit submits both jobs and follows them (squeue and scontrol, each call
with a timeout) until the merge ends, then prints the merged report; a job
written without it is submitted so later: bmx slurm --submit JOBDIR. A follow
that was interrupted goes on with --follow JOB (the job directory, or a Slurm
job ID Slurm still remembers). --resume DIR submits again the shards that did
not finish (or those --shards names) and a new merge; a task that finds its
shard's run resumes it, as a task requeued after preemption does.
Exit 3 when a shard failed or cells are missing from the merged run.`,
		Example: `  bmx slurm -c matrix.toml --nodes 4 --partition gpu --gpus-per-node 8 --time 12:00:00 --submit
  bmx slurm -c matrix.toml --nodes 4 --dry-run
  bmx slurm --submit runs/20260310T120000Z-sm120-slurm
  bmx slurm --follow runs/20260310T120000Z-sm120-slurm
  bmx slurm --resume runs/20260310T120000Z-sm120-slurm --shards 2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Written = args[0]
			}
			if err := checkSlurmFlags(cmd, opts); err != nil {
				return err
			}
			return runSlurm(cmd.Context(), opts, io)
		},
	}
	addConfigFlags(cmd, &opts.configOptions)
	f := cmd.Flags()
	f.IntVar(&opts.Nodes, "nodes", 0, "shards: one array task, on one node, each")
	f.StringVar(&opts.Partition, "partition", "", "the Slurm partition (default: the cluster's)")
	f.IntVar(&opts.GPUsPerNode, "gpus-per-node", 0, "GPUs a task gets when the config has no [[slot]] (0: ask for none)")
	f.StringVar(&opts.Time, "time", "", "each task's time limit, in Slurm's format (e.g. 12:00:00)")
	outFlag(cmd, &opts.Out, defaultOut, "directory that holds job directories")
	f.BoolVar(&opts.Submit, "submit", false, "submit the jobs and follow them until the merged report is written")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the scripts (or, with --resume, what would be submitted); write and submit nothing")
	f.StringVar(&opts.Follow, "follow", "", "follow a submitted job: its job directory or a Slurm job ID")
	f.StringVar(&opts.Resume, "resume", "", "submit again the shards of this job directory that did not finish, and a new merge")
	f.IntSliceVar(&opts.Shards, "shards", nil, "with --resume: these shards (comma-separated), finished or not")
	f.DurationVar(&opts.Poll, "poll", 10*time.Second, "how often to ask Slurm while following")
	f.StringVar(&opts.Bmx, "bmx", "", "the bmx executable as the nodes see it (default: this one)")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress on stderr while following")
	return cmd
}

// checkSlurmFlags refuses flags that do not go together.
func checkSlurmFlags(cmd *cobra.Command, o *slurmOptions) error {
	changed := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if cmd.Flags().Changed(n) {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	newJob := []string{"config", "var", "only", "max-cells", "nodes", "partition", "gpus-per-node", "time", "out", "bmx"}
	switch {
	case o.Written != "":
		if !o.Submit && !o.DryRun {
			return usageErrorf("%s: a job directory is submitted with --submit (or previewed with --dry-run)", o.Written)
		}
		if c := changed(append(newJob, "follow", "resume", "shards")...); len(c) > 0 {
			return usageErrorf("--submit %s submits the job as it was written: %s do not apply", o.Written, strings.Join(c, ", "))
		}
	case o.Follow != "" && o.Resume != "":
		return usageErrorf("--follow and --resume: one at a time")
	case o.Follow != "":
		if c := changed(append(newJob, "submit", "dry-run", "shards")...); len(c) > 0 {
			return usageErrorf("--follow only follows: %s do not apply", strings.Join(c, ", "))
		}
	case o.Resume != "":
		if c := changed(append(newJob, "submit")...); len(c) > 0 {
			return usageErrorf("--resume submits the job as it was written: %s do not apply", strings.Join(c, ", "))
		}
	default:
		if o.Nodes < 1 {
			return usageErrorf("--nodes N: how many shards (and nodes) to spread the sweep over, at least 1")
		}
		if len(o.Shards) > 0 {
			return usageErrorf("--shards only applies to --resume")
		}
	}
	if err := checkConfigFlags(&o.configOptions); err != nil {
		return err
	}
	if o.Submit && o.DryRun {
		return usageErrorf("--submit and --dry-run: one or the other")
	}
	for name, v := range map[string]string{"partition": o.Partition, "time": o.Time} {
		if strings.ContainsAny(v, " \t\r\n'\"\\") {
			return usageErrorf("--%s %q: no spaces or quotes", name, v)
		}
	}
	if o.GPUsPerNode < 0 {
		return usageErrorf("--gpus-per-node %d: want 0 or more", o.GPUsPerNode)
	}
	if o.Poll <= 0 {
		return usageErrorf("--poll %s: want a positive duration", o.Poll)
	}
	return nil
}

func runSlurm(ctx context.Context, opts *slurmOptions, io iostreams) error {
	switch {
	case opts.Follow != "":
		return runSlurmFollow(ctx, opts, io)
	case opts.Resume != "":
		return runSlurmResume(ctx, opts, io)
	case opts.Written != "":
		return runSlurmWritten(ctx, opts, io)
	}
	return runSlurmNew(ctx, opts, io)
}

// runSlurmNew writes a new job directory, and submits it with --submit.
func runSlurmNew(ctx context.Context, opts *slurmOptions, io iostreams) error {
	cfg, plan, err := opts.configOptions.load(io.Err)
	if err != nil {
		return err
	}
	so := slurm.Options{Config: opts.Config, Vars: opts.Vars, Only: opts.Only, MaxCells: maxCellsFlag(opts.MaxCells),
		Nodes: opts.Nodes, GPUsPerNode: opts.GPUsPerNode, Partition: opts.Partition, Time: opts.Time, Bmx: opts.Bmx, Out: opts.Out}
	if so.Bmx == "" {
		so.Bmx = selfExecutable()
	}
	p := slurm.Plan{Config: cfg, Plan: plan}
	if opts.Submit {
		// Checked before the job directory is written: a job that cannot
		// be submitted from here is not left behind half made.
		if err := slurm.Available(); err != nil {
			return withCode(ExitInfra, err)
		}
	}
	if opts.DryRun {
		j, err := slurm.Preview(so, p, time.Now())
		if err != nil {
			return withCode(ExitUsage, err)
		}
		fmt.Fprintf(io.Out, "# %s\n%s\n# %s (submitted with --dependency=afterany:<the array's job ID>)\n%s", filepath.Join(j.Dir, slurm.ShardsScript),
			j.ShardsScript(opts.Vars), filepath.Join(j.Dir, slurm.MergeScript), j.MergeScript())
		return nil
	}
	j, err := slurm.Create(so, p, time.Now())
	if err != nil {
		return withCode(ExitUsage, err)
	}
	fmt.Fprintf(io.Err, "bmx: %d cells of %s in %d shards (%s cells each, the reference included where it runs) in %s\n",
		len(plan.Cells), cfg.Name, j.Shards, joinInts(j.Sizes), j.Dir)
	if !opts.Submit {
		fmt.Fprintf(io.Err, "bmx: submit and follow it: bmx slurm --submit %s\n", j.Dir)
		return nil
	}
	return submitAndFollow(ctx, j, nil, opts, io)
}

// runSlurmWritten submits, for the first time, a job written without
// --submit: every shard and the merge. A job submitted already is resumed
// (--resume), which submits only what did not finish.
func runSlurmWritten(ctx context.Context, opts *slurmOptions, io iostreams) error {
	j, err := slurm.Load(opts.Written)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if last, ok := j.Last(); ok {
		return usageErrorf("%s was submitted already (job %s): to submit what did not finish: bmx slurm --resume %s", j.Dir, last.Array, j.Dir)
	}
	if opts.DryRun {
		fmt.Fprintf(io.Out, "sbatch --parsable %s\nsbatch --parsable --dependency=afterany:<that job> %s\n",
			filepath.Join(j.Dir, slurm.ShardsScript), filepath.Join(j.Dir, slurm.MergeScript))
		return nil
	}
	if err := slurm.Available(); err != nil {
		return withCode(ExitInfra, err)
	}
	return submitAndFollow(ctx, j, nil, opts, io)
}

// runSlurmResume submits again the shards that did not finish.
func runSlurmResume(ctx context.Context, opts *slurmOptions, io iostreams) error {
	j, err := slurm.Load(opts.Resume)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	shards := opts.Shards
	if len(shards) == 0 {
		if shards = j.Unfinished(); len(shards) == 0 {
			fmt.Fprintf(io.Err, "bmx: every shard of %s finished; to merge them again: bmx merge %s/shard-*/*/ -o %s\n", j.Dir, j.Dir, j.MergedDir())
			return nil
		}
	}
	for _, s := range shards {
		if s < 0 || s >= j.Shards {
			return usageErrorf("--shards %d: the job has shards 0 to %d", s, j.Shards-1)
		}
	}
	if opts.DryRun {
		fmt.Fprintf(io.Out, "sbatch --parsable --array=%s %s\nsbatch --parsable --dependency=afterany:<that job> %s\n",
			joinInts(shards), filepath.Join(j.Dir, slurm.ShardsScript), filepath.Join(j.Dir, slurm.MergeScript))
		return nil
	}
	if err := slurm.Available(); err != nil {
		return withCode(ExitInfra, err)
	}
	return submitAndFollow(ctx, j, shards, opts, io)
}

func submitAndFollow(ctx context.Context, j *slurm.Job, shards []int, opts *slurmOptions, io iostreams) error {
	sub, err := j.Submit(ctx, slurm.Client{Env: slurm.SecretEnv(opts.Vars)}, shards)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintf(io.Err, "bmx: submitted shards %s as job %s, the merge as job %s\n", joinInts(sub.Shards), sub.Array, sub.Merge)
	return followSlurm(ctx, j, opts, io)
}

// runSlurmFollow follows a job named by its directory or a Slurm job ID.
func runSlurmFollow(ctx context.Context, opts *slurmOptions, io iostreams) error {
	dir := opts.Follow
	if _, err := os.Stat(filepath.Join(dir, slurm.JobFile)); err != nil {
		if _, nerr := strconv.Atoi(dir); nerr != nil {
			return withCode(ExitUsage, fmt.Errorf("--follow %s: neither a job directory nor a Slurm job ID", dir))
		}
		if dir, err = slurm.FindJob(ctx, slurm.Client{}, opts.Follow); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--follow %s: %w (give the job directory instead)", opts.Follow, err))
		}
	}
	j, err := slurm.Load(dir)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	return followSlurm(ctx, j, opts, io)
}

func followSlurm(ctx context.Context, j *slurm.Job, opts *slurmOptions, io iostreams) error {
	start := time.Now()
	st, err := j.Follow(ctx, slurm.Client{}, opts.Poll, func(st slurm.Status) {
		if !opts.Quiet {
			fmt.Fprintf(io.Err, "bmx: slurm [%s] %s\n", time.Since(start).Round(time.Second), st.Line())
		}
	})
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(io.Err, "bmx: stopped following; the jobs go on: bmx slurm --follow %s\n", j.Dir)
		return withCode(ExitInterrupted, errSilent)
	case err != nil:
		return withCode(ExitInfra, fmt.Errorf("%w; follow again: bmx slurm --follow %s", err, j.Dir))
	}
	return showSlurmEnd(j, st, io)
}

// showSlurmEnd prints the merged report and says what did not finish.
func showSlurmEnd(j *slurm.Job, st slurm.Status, io iostreams) error {
	failed := st.Failed()
	for _, sh := range failed {
		state := sh.Task.State
		if state == "" {
			state = "not run by this submission"
		} else if sh.Task.ExitCode != "" {
			state += " (exit " + sh.Task.ExitCode + ")"
		}
		fmt.Fprintf(io.Err, "bmx: shard %d: %s, %d of %d cells done; its output: %s\n", sh.Index, state, sh.Done, sh.Cells,
			j.ShardOutput(sh.Index, st.Submission.Array))
	}
	m, err := reports.ReadMerged(j.MergedDir())
	if err != nil {
		return withCode(ExitInfra, fmt.Errorf("the merge (job %s, %s) left no merged run: %w; its output: %s",
			st.Submission.Merge, st.Merge.State, err, j.MergeOutput(st.Submission.Merge)))
	}
	if err := reports.TableWith(io.Out, m.Report, reports.TableOptions{Color: termstatus.ColorOK(io.Out), Width: termstatus.Width(io.Out)}); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintln(io.Err)
	if err := reports.MergeSummary(io.Err, m); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintf(io.Err, "bmx: merged report %s\n", filepath.Join(j.MergedDir(), reports.MarkdownFile))
	if len(failed) > 0 || !m.Complete() {
		fmt.Fprintf(io.Err, "bmx: to run what did not finish: bmx slurm --resume %s\n", j.Dir)
		return withCode(ExitInfra, errors.New("the sweep is incomplete"))
	}
	return nil
}

// maxCellsFlag is --max-cells for the tasks to pass on: 0 (leave it out)
// at bmx's default.
func maxCellsFlag(n int) int {
	if n == matrix.DefaultMaxCells {
		return 0
	}
	return n
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
