package slurm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Submit submits the shards (all of them when none are given) and a merge
// that waits for them to end however they end (afterany), records the
// submission in job.json and returns it.
func (j *Job) Submit(ctx context.Context, c Client, shards []int) (Submission, error) {
	var args []string
	if len(shards) > 0 {
		var idx []string
		for _, s := range shards {
			if s < 0 || s >= j.Shards {
				return Submission{}, fmt.Errorf("shard %d: the job has shards 0 to %d", s, j.Shards-1)
			}
			idx = append(idx, strconv.Itoa(s))
		}
		args = append(args, "--array="+strings.Join(idx, ","))
	} else {
		for i := range j.Shards {
			shards = append(shards, i)
		}
	}
	array, err := c.Sbatch(ctx, filepath.Join(j.Dir, ShardsScript), args...)
	if err != nil {
		return Submission{}, fmt.Errorf("submit the shards: %w", err)
	}
	sub := Submission{Array: array, Shards: shards, At: time.Now().UTC()}
	merge, err := c.Sbatch(ctx, filepath.Join(j.Dir, MergeScript), "--dependency=afterany:"+array)
	if err != nil {
		// The shards run; record them, so a resubmission can merge them.
		j.Submissions = append(j.Submissions, sub)
		if serr := j.save(); serr != nil {
			return sub, errors.Join(err, serr)
		}
		return sub, fmt.Errorf("submit the merge (the shards are job %s): %w", array, err)
	}
	sub.Merge = merge
	j.Submissions = append(j.Submissions, sub)
	return sub, j.save()
}

// ShardStatus is one shard: how far its run got, and its task's state in
// the latest submission (State "" when that submission did not run it).
type ShardStatus struct {
	ShardProgress
	Task TaskState
}

// Status is one look at a job: Slurm's states and the job directory.
type Status struct {
	Submission Submission
	Shards     []ShardStatus
	Merge      TaskState
	// MergeGone says Slurm no longer knows the merge job: it ended long
	// enough ago to be forgotten.
	MergeGone bool
}

// Done says the merge job ended.
func (s Status) Done() bool { return s.MergeGone || s.Merge.Done() }

// Line is the status in one line, for progress output.
func (s Status) Line() string {
	count := map[string]int{}
	done, cells := 0, 0
	for _, sh := range s.Shards {
		done += sh.Done
		cells += sh.Cells
		if sh.Task.State != "" {
			count[strings.ToLower(sh.Task.State)]++
		}
	}
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
	}
	merge := strings.ToLower(s.Merge.State)
	switch {
	case s.MergeGone:
		merge = "ended"
	case merge == "":
		merge = "unknown"
	case s.Merge.Reason != "" && s.Merge.Reason != "None":
		merge += " (" + s.Merge.Reason + ")"
	}
	return fmt.Sprintf("shards: %s; %d/%d cells done; merge: %s", strings.Join(parts, ", "), done, cells, merge)
}

// Failed are the shards whose task of the latest submission ended other
// than COMPLETED, or whose run did not finish its cells.
func (s Status) Failed() []ShardStatus {
	var out []ShardStatus
	for _, sh := range s.Shards {
		if (sh.Task.State != "" && sh.Task.Done() && sh.Task.State != "COMPLETED") || !sh.Finished() {
			out = append(out, sh)
		}
	}
	return out
}

// Look asks Slurm about the latest submission once.
func (j *Job) Look(ctx context.Context, c Client) (Status, error) {
	sub, ok := j.Last()
	if !ok {
		return Status{}, fmt.Errorf("%s was never submitted", j.Dir)
	}
	st := Status{Submission: sub}
	jobs := []string{sub.Array}
	if sub.Merge != "" {
		jobs = append(jobs, sub.Merge)
	}
	tasks, err := c.Queue(ctx, jobs...)
	if err != nil {
		return st, err
	}
	for i := range j.Shards {
		sh := ShardStatus{ShardProgress: j.Progress(i)}
		for _, t := range tasks {
			if strings.HasPrefix(t.ID, sub.Array+"_") && t.Task == i {
				sh.Task = t
			}
		}
		st.Shards = append(st.Shards, sh)
	}
	if sub.Merge == "" {
		st.MergeGone = true
		return st, nil
	}
	for _, t := range tasks {
		if t.ID == sub.Merge {
			st.Merge = t
		}
	}
	if st.Merge.State == "" || st.Merge.Done() {
		// Not listed (forgotten), or ended: scontrol has its exit code.
		shown, err := c.Show(ctx, sub.Merge)
		switch {
		case errors.Is(err, ErrNoJob):
			st.MergeGone = true
		case err != nil:
			return st, err
		default:
			st.Merge.ID, st.Merge.State, st.Merge.ExitCode = sub.Merge, shown[0]["JobState"], shown[0]["ExitCode"]
		}
	}
	return st, nil
}

// MaxCallFailures is how many looks in a row may fail (a call timed out,
// the controller restarts) before Follow gives up.
const MaxCallFailures = 3

// Follow looks at the latest submission every interval until its merge
// job ends, calling progress with each status whose line differs from the
// one before. It returns the last status; ctx's end returns ctx.Err()
// (follow again later: the job runs on).
func (j *Job) Follow(ctx context.Context, c Client, every time.Duration, progress func(Status)) (Status, error) {
	var last string
	failures := 0
	for {
		st, err := j.Look(ctx, c)
		switch {
		case ctx.Err() != nil:
			return st, ctx.Err()
		case err != nil:
			failures++
			if failures >= MaxCallFailures {
				return st, fmt.Errorf("%d looks at the job failed in a row, the last: %w", failures, err)
			}
		default:
			failures = 0
			if line := st.Line(); line != last && progress != nil {
				progress(st)
				last = line
			}
			if st.Done() {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(every):
		}
	}
}

// FindJob finds the job directory of a Slurm job ID (the array's or the
// merge's) through scontrol: the script it runs is in the job directory.
// Slurm forgets a job some minutes after it ends (MinJobAge); then only
// the directory will do.
func FindJob(ctx context.Context, c Client, id string) (string, error) {
	shown, err := c.Show(ctx, id)
	if err != nil {
		return "", err
	}
	cmd := shown[0]["Command"]
	if name := filepath.Base(cmd); name != ShardsScript && name != MergeScript {
		return "", fmt.Errorf("job %s runs %q, not a bmx slurm script", id, cmd)
	}
	return filepath.Dir(cmd), nil
}
