// Package slurm spreads a sweep over the hosts of a Slurm cluster: one job
// array task per shard (bmx sweep --shard i/n), and a merge job that depends
// on the array (afterany) and makes the shards one run (bmx merge). bmx
// uses the cluster's scheduler and schedules nothing itself.
//
// It writes the two sbatch scripts into a job directory, submits them,
// follows them through squeue and scontrol (each call bounded by a
// timeout: a dead slurmctld makes clients hang), and resubmits the shards
// that did not finish. Everything it needs later is in the job directory,
// which must be on a filesystem every node sees:
//
//	<dir>/job.json        the job, and every submission of it (Slurm job IDs)
//	<dir>/shards.sbatch   the array: task i sweeps shard i into shard-<i>/
//	<dir>/merge.sbatch    the merge of every shard-<i>/<run>/ into merged/
//	<dir>/shard-<i>/      shard i's run directory (one; a rerun resumes it)
//	<dir>/slurm/          Slurm's output of each task and merge
//	<dir>/merged/         the merged run: report.md, report.html, ...
//
// It nests under the launcher, as probe and sim do: it starts sweeps, on
// other hosts. Scripts are written on any OS; Slurm's commands run on Linux.
package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Files and directories of a job directory.
const (
	JobFile      = "job.json"
	ShardsScript = "shards.sbatch"
	MergeScript  = "merge.sbatch"
	MergedDir    = "merged"
	SlurmDir     = "slurm"
)

// Job is a sweep spread over a Slurm cluster: what job.json holds.
type Job struct {
	// Dir is the job directory (absolute); not stored.
	Dir string `json:"-"`
	// Name is the matrix's name.
	Name string `json:"name"`
	// Config is the matrix file (absolute; "" = the built-in simulated host).
	Config string `json:"config,omitempty"`
	// Only is the --only filter every shard applies before it is dealt.
	Only []string `json:"only,omitempty"`
	// MaxCells is the --max-cells the tasks pass on (0: bmx's default).
	MaxCells int `json:"max_cells,omitempty"`
	// Shards is the number of shards: one array task, one node, each.
	Shards int `json:"shards"`
	// Sizes are the cells of each shard, the reference where it runs.
	Sizes []int `json:"sizes"`
	// GPUsPerTask is what each task asks Slurm for (0 = none).
	GPUsPerTask int    `json:"gpus_per_task,omitempty"`
	Partition   string `json:"partition,omitempty"`
	Time        string `json:"time,omitempty"`
	// Bmx is the bmx executable the nodes run.
	Bmx string `json:"bmx"`
	// Workdir is where the tasks run (the directory bmx slurm ran in), so
	// relative paths in vars mean what they meant there.
	Workdir string `json:"workdir"`
	// Created is when the job directory was written.
	Created time.Time `json:"created"`
	// Submissions are every sbatch of it, the first and each resubmission
	// of shards that did not finish.
	Submissions []Submission `json:"submissions"`
}

// Submission is one sbatch of the array (some or all of its shards) and of
// the merge that waits for it.
type Submission struct {
	Array  string    `json:"array"`
	Merge  string    `json:"merge"`
	Shards []int     `json:"shards"`
	At     time.Time `json:"at"`
}

// Options say what to spread and how to ask Slurm for it.
type Options struct {
	// Config is the matrix file ("" = the built-in simulated host); it is
	// made absolute.
	Config string
	// Vars are the --var name=value pairs every task passes on.
	Vars []string
	Only []string
	// MaxCells raises (or lowers) bmx's limit on a matrix's cells for the
	// tasks, as --max-cells did for the caller (0: the default).
	MaxCells int
	// Nodes is the number of shards.
	Nodes int
	// GPUsPerNode is how many GPUs a node gives a task (0 = unknown).
	GPUsPerNode int
	Partition   string
	Time        string
	// Bmx is the bmx executable, as the nodes see it.
	Bmx string
	// Out holds job directories: the job goes into a new one there.
	Out string
}

// Plan is what a job will run: the matrix loaded and checked by the
// caller.
type Plan struct {
	Config *matrix.Config
	Plan   *matrix.Plan
}

// TaskGPUs is how many GPUs a shard's task asks for. With [[slot]]s in the
// config, a cell runs on a slot's GPUs and a task on all its slots', so the
// task asks for the GPUs its slots name. Without slots a cell gets every GPU
// of its task, so the task asks for gpusPerNode. 0 asks for none (the
// simulated host needs no GPU).
func TaskGPUs(cfg *matrix.Config, gpusPerNode int) (int, error) {
	if len(cfg.Slots) == 0 {
		return gpusPerNode, nil
	}
	var ids []string
	for _, s := range cfg.Slots {
		for _, g := range strings.Split(s.GPUs, ",") {
			if g = strings.TrimSpace(g); g != "" && !slices.Contains(ids, g) {
				ids = append(ids, g)
			}
		}
	}
	if gpusPerNode > 0 && len(ids) > gpusPerNode {
		return 0, fmt.Errorf("the config's [[slot]]s use %d GPUs (%s), more than --gpus-per-node %d", len(ids), strings.Join(ids, ","), gpusPerNode)
	}
	return len(ids), nil
}

// Create writes a new job directory under opts.Out: job.json and both
// scripts. Nothing is submitted.
func Create(opts Options, p Plan, now time.Time) (*Job, error) {
	j, err := newJob(opts, p, now)
	if err != nil {
		return nil, err
	}
	dir, err := record.CreateRunDir(opts.Out, p.Config.Name+"-slurm", now)
	if err != nil {
		return nil, err
	}
	if j.Dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(j.Dir, SlurmDir), 0o755); err != nil {
		return nil, fmt.Errorf("create job directory: %w", err)
	}
	for name, text := range map[string]string{ShardsScript: j.ShardsScript(opts.Vars), MergeScript: j.MergeScript()} {
		if err := os.WriteFile(filepath.Join(j.Dir, name), []byte(text), 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return j, j.save()
}

// Preview is the job Create would write, in a directory not yet named, for
// --dry-run.
func Preview(opts Options, p Plan, now time.Time) (*Job, error) {
	j, err := newJob(opts, p, now)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return nil, err
	}
	j.Dir = filepath.Join(out, now.UTC().Format("20060102T150405Z")+"-"+p.Config.Name+"-slurm")
	return j, nil
}

func newJob(opts Options, p Plan, now time.Time) (*Job, error) {
	if opts.Nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: want at least 1", opts.Nodes)
	}
	gpus, err := TaskGPUs(p.Config, opts.GPUsPerNode)
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	j := &Job{Name: p.Config.Name, Only: opts.Only, MaxCells: opts.MaxCells, Shards: opts.Nodes, GPUsPerTask: gpus,
		Partition: opts.Partition, Time: opts.Time, Bmx: opts.Bmx, Workdir: wd, Created: now.UTC(), Submissions: []Submission{}}
	if opts.Config != "" {
		if j.Config, err = filepath.Abs(opts.Config); err != nil {
			return nil, err
		}
	}
	j.Sizes = p.Plan.Assign(opts.Nodes).Sizes()
	return j, nil
}

// Load reads a job directory.
func Load(dir string) (*Job, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(abs, JobFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a bmx slurm job directory: %w", dir, err)
	}
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(abs, JobFile), err)
	}
	j.Dir = abs
	return &j, nil
}

func (j *Job) save() error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	// Written as every file of a run is (synced, then renamed over the
	// old one): a crash or a full disk leaves the old job.json or the new.
	if err := record.WriteFile(filepath.Join(j.Dir, JobFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", JobFile, err)
	}
	return nil
}

// ShardDir is where shard i's run directory goes.
func (j *Job) ShardDir(i int) string { return filepath.Join(j.Dir, "shard-"+strconv.Itoa(i)) }

// ShardOutput is where Slurm wrote what shard i's task of an array printed.
func (j *Job) ShardOutput(i int, array string) string {
	return filepath.Join(j.Dir, SlurmDir, fmt.Sprintf("shard-%d-%s.out", i, array))
}

// MergeOutput is where Slurm wrote what a merge job printed.
func (j *Job) MergeOutput(merge string) string {
	return filepath.Join(j.Dir, SlurmDir, "merge-"+merge+".out")
}

// MergedDir is the merged run.
func (j *Job) MergedDir() string { return filepath.Join(j.Dir, MergedDir) }

// Last is the latest submission (false before the first).
func (j *Job) Last() (Submission, bool) {
	if len(j.Submissions) == 0 {
		return Submission{}, false
	}
	return j.Submissions[len(j.Submissions)-1], true
}

// ShardRun is shard i's run directory (by record.IsRunDir's rule), "" when
// the shard has not made one yet.
func (j *Job) ShardRun(i int) string {
	entries, err := os.ReadDir(j.ShardDir(i))
	if err != nil {
		return ""
	}
	run := ""
	for _, e := range entries {
		if dir := filepath.Join(j.ShardDir(i), e.Name()); e.IsDir() && record.IsRunDir(dir) {
			run = dir
		}
	}
	return run
}

// ShardProgress is how far a shard got, from its run directory.
type ShardProgress struct {
	Index int
	// Run is its run directory ("" before it made one).
	Run string
	// Done and Cells count its finished and planned cells.
	Done, Cells int
	// Ended says the shard's sweep ran to its end (interrupted or not).
	Ended, Interrupted bool
}

// Finished reports whether the shard ran every cell.
func (p ShardProgress) Finished() bool {
	return p.Run != "" && p.Ended && !p.Interrupted && p.Done >= p.Cells
}

// Progress reads how far shard i got, from its run.json and the cell IDs
// in its results.jsonl (a line being written is not counted).
func (j *Job) Progress(i int) ShardProgress {
	p := ShardProgress{Index: i, Run: j.ShardRun(i)}
	if i < len(j.Sizes) {
		p.Cells = j.Sizes[i]
	}
	if p.Run == "" {
		return p
	}
	if run, err := record.ReadRun(p.Run); err == nil {
		p.Cells, p.Ended, p.Interrupted = run.Cells, !run.Ended.IsZero(), run.Interrupted
	}
	if data, err := os.ReadFile(filepath.Join(p.Run, record.ResultsFile)); err == nil {
		ids := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			var r struct {
				Cell struct {
					ID string `json:"id"`
				} `json:"cell"`
			}
			if json.Unmarshal([]byte(line), &r) == nil && r.Cell.ID != "" {
				ids[r.Cell.ID] = true
			}
		}
		p.Done = len(ids)
	}
	return p
}

// Unfinished are the shards that did not run all their cells: those to
// resubmit.
func (j *Job) Unfinished() []int {
	var out []int
	for i := range j.Shards {
		if !j.Progress(i).Finished() {
			out = append(out, i)
		}
	}
	return out
}

// ErrNoJob means a job ID is not one Slurm knows (any more).
var ErrNoJob = errors.New("no such Slurm job")
