package slurm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// ShardsScript is the job array: task i sweeps shard i of the job into
// shard-<i>/. The shard count is written in, not read from
// SLURM_ARRAY_TASK_COUNT: a resubmission of shard 2 alone is an array of one
// task whose shard is still 2 of n. A task that finds its shard's run
// directory (requeued after preemption, or resubmitted) resumes it, so
// finished cells never run twice. vars are the --var pairs, passed on both
// ways: a secret is not in run.json, so a resume needs it again.
func (j *Job) ShardsScript(vars []string) string {
	q := func(s string) string { return matrix.ShellJoin([]string{s}) }
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# bmx slurm: the shards of %s, written %s.\n", j.Name, j.Created.Format("2006-01-02 15:04:05Z"))
	fmt.Fprintf(&b, "# Task i sweeps shard i/%d into %s; run again, it resumes that run.\n", j.Shards, filepath.Join(j.Dir, "shard-<i>"))
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", q("bmx-"+j.Name))
	fmt.Fprintf(&b, "#SBATCH --array=0-%d\n", j.Shards-1)
	b.WriteString("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n")
	if j.GPUsPerTask > 0 {
		fmt.Fprintf(&b, "#SBATCH --gpus-per-task=%d\n", j.GPUsPerTask)
	}
	j.commonDirectives(&b)
	b.WriteString("#SBATCH --requeue\n")
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", q(filepath.Join(j.Dir, SlurmDir, "shard-%a-%A.out")))
	b.WriteString("set -u\n")
	b.WriteString("i=${SLURM_ARRAY_TASK_ID:?not a Slurm array task}\n")
	fmt.Fprintf(&b, "out=%s/shard-$i\n", q(j.Dir))
	b.WriteString("prev=\nfor d in \"$out\"/*/; do\n  if [ -f \"${d}run.json\" ]; then prev=${d%/}; fi\ndone\n")
	var varArgs []string
	secrets := ""
	for _, v := range vars {
		if name, env, ok := SecretVar(v); ok {
			// Never written: the task reads it from the environment
			// sbatch hands on from the submitter (see SecretEnv).
			secrets += fmt.Sprintf(" --var \"%s=${%s:?set by bmx slurm at submission}\"", name, env)
			continue
		}
		varArgs = append(varArgs, "--var", v)
	}
	if j.MaxCells > 0 {
		varArgs = append(varArgs, "--max-cells", strconv.Itoa(j.MaxCells))
	}
	resume := append([]string{j.Bmx, "sweep", "--quiet"}, varArgs...)
	fmt.Fprintf(&b, "if [ -n \"$prev\" ]; then\n  echo \"bmx slurm: shard $i: resuming $prev\"\n  exec %s%s --resume \"$prev\"\nfi\n", matrix.ShellJoin(resume), secrets)
	sweep := []string{j.Bmx, "sweep", "--quiet"}
	if j.Config != "" {
		sweep = append(sweep, "-c", j.Config)
	}
	sweep = append(sweep, varArgs...)
	for _, o := range j.Only {
		sweep = append(sweep, "--only", o)
	}
	fmt.Fprintf(&b, "exec %s%s --out \"$out\" --shard \"$i/%d\"\n", matrix.ShellJoin(sweep), secrets, j.Shards)
	return b.String()
}

// SecretVar reports a --var pair that holds a secret (its name looks
// secret, or its value is key-shaped), its name, and the environment
// variable that carries it to the tasks.
func SecretVar(pair string) (name, env string, ok bool) {
	name, value, _ := strings.Cut(pair, "=")
	if !matrix.SecretName(name) && !matrix.SecretShape(value) {
		return "", "", false
	}
	env = "BMX_VAR_" + strings.ToUpper(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name))
	return name, env, true
}

// SecretEnv is the environment sbatch must run with so that the tasks get
// the secret vars the scripts do not hold: sbatch hands its environment on
// to the job (--export=ALL, Slurm's default).
func SecretEnv(vars []string) []string {
	var env []string
	for _, v := range vars {
		if _, e, ok := SecretVar(v); ok {
			_, value, _ := strings.Cut(v, "=")
			env = append(env, e+"="+value)
		}
	}
	return env
}

// MergeScript merges the run directory of every shard that made one into
// merged/ (an earlier merge there is replaced). It is submitted with
// --dependency=afterany on the array, so it runs however the shards ended;
// bmx merge says which cells are missing.
func (j *Job) MergeScript() string {
	q := func(s string) string { return matrix.ShellJoin([]string{s}) }
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# bmx slurm: the merge of the shards of %s, written %s.\n", j.Name, j.Created.Format("2006-01-02 15:04:05Z"))
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", q("bmx-"+j.Name+"-merge"))
	b.WriteString("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n")
	j.commonDirectives(&b)
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", q(filepath.Join(j.Dir, SlurmDir, "merge-%j.out")))
	b.WriteString("shopt -s nullglob\nruns=()\n")
	fmt.Fprintf(&b, "for f in %s/shard-*/*/run.json; do runs+=(\"${f%%/run.json}\"); done\n", q(j.Dir))
	b.WriteString("if [ ${#runs[@]} -eq 0 ]; then\n  echo \"bmx slurm: no shard made a run directory: nothing to merge\" >&2\n  exit 3\nfi\n")
	fmt.Fprintf(&b, "exec %s \"${runs[@]}\" -o %s\n", matrix.ShellJoin([]string{j.Bmx, "merge"}), q(j.MergedDir()))
	return b.String()
}

func (j *Job) commonDirectives(b *strings.Builder) {
	if j.Partition != "" {
		fmt.Fprintf(b, "#SBATCH --partition=%s\n", j.Partition)
	}
	if j.Time != "" {
		fmt.Fprintf(b, "#SBATCH --time=%s\n", j.Time)
	}
	fmt.Fprintf(b, "#SBATCH --chdir=%s\n", matrix.ShellJoin([]string{j.Workdir}))
}
