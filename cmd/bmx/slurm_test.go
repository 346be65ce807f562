package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmFlags: flags that cannot go together are refused before
// anything is written or submitted.
func TestSlurmFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no nodes", []string{"slurm"}, "--nodes N"},
		{"zero nodes", []string{"slurm", "--nodes", "0"}, "--nodes N"},
		{"submit and dry run", []string{"slurm", "--nodes", "2", "--submit", "--dry-run"}, "one or the other"},
		{"follow with a config", []string{"slurm", "--follow", "7", "-c", "m.toml"}, "--follow only follows: --config"},
		{"resume with nodes", []string{"slurm", "--resume", "dir", "--nodes", "3"}, "--resume submits the job as it was written: --nodes"},
		{"follow and resume", []string{"slurm", "--follow", "7", "--resume", "dir"}, "one at a time"},
		{"shards without resume", []string{"slurm", "--nodes", "2", "--shards", "1"}, "--shards only applies to --resume"},
		{"partition with a space", []string{"slurm", "--nodes", "2", "--partition", "gpu a"}, `--partition "gpu a": no spaces`},
		{"time with a newline", []string{"slurm", "--nodes", "2", "--time", "1:00\n#SBATCH --x"}, "--time"},
		{"no poll", []string{"slurm", "--nodes", "2", "--poll", "0s"}, "--poll 0s"},
		{"follow what", []string{"slurm", "--follow", "nowhere"}, "neither a job directory nor a Slurm job ID"},
		{"resume what", []string{"slurm", "--resume", "nowhere"}, "not a bmx slurm job directory"},
		{"sweep: shard out of range", []string{"sweep", "--shard", "3/3"}, `--shard "3/3": want 0 <= i < n`},
		{"sweep: shard not i/n", []string{"sweep", "--shard", "2"}, "want i/n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := bmx(t, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d; stderr %q lacks %q", code, ExitUsage, stderr, tt.want)
			}
		})
	}
}

// TestSlurmWrite writes a job without submitting it (any OS): the job
// directory with both scripts, and how to submit it.
func TestSlurmWrite(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code, stdout, stderr := bmx(t, "slurm", "--nodes", "3", "--out", out, "--gpus-per-node", "4", "--bmx", "/shared/bin/bmx")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	dir := runDir(t, out)
	for _, want := range []string{"12 cells of sim-sm120 in 3 shards (5,5,4 cells each", "bmx slurm --submit " + dir} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	script, err := os.ReadFile(filepath.Join(dir, "shards.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#SBATCH --array=0-2\n", "#SBATCH --gpus-per-task=4\n", `exec /shared/bin/bmx sweep --quiet --out "$out" --shard "$i/3"`} {
		if !strings.Contains(string(script), want) {
			t.Errorf("shards.sbatch lacks %q:\n%s", want, script)
		}
	}
	// --dry-run prints the same scripts and writes nothing.
	dry := t.TempDir()
	code, stdout, _ = bmx(t, "slurm", "--nodes", "3", "--out", dry, "--gpus-per-node", "4", "--bmx", "/shared/bin/bmx", "--dry-run")
	if code != ExitOK || !strings.Contains(stdout, "#SBATCH --gpus-per-task=4\n") || !strings.Contains(stdout, "/shared/bin/bmx merge") {
		t.Errorf("--dry-run: exit %d\n%s", code, stdout)
	}
	if entries, _ := os.ReadDir(dry); len(entries) != 0 {
		t.Errorf("--dry-run wrote %d entries into --out", len(entries))
	}
	// --resume --dry-run of the written job: every shard is unfinished.
	code, stdout, _ = bmx(t, "slurm", "--resume", dir, "--dry-run")
	if code != ExitOK || !strings.Contains(stdout, "--array=0,1,2 "+filepath.Join(dir, "shards.sbatch")) {
		t.Errorf("--resume --dry-run: exit %d\n%s", code, stdout)
	}
	// The written job is submitted, the first time, with --submit DIR (a
	// preview with --dry-run DIR): the whole array, no "resume".
	code, stdout, stderr = bmx(t, "slurm", "--dry-run", dir)
	if code != ExitOK || !strings.Contains(stdout, "sbatch --parsable "+filepath.Join(dir, "shards.sbatch")+"\n") || strings.Contains(stdout+stderr, "resum") {
		t.Errorf("--dry-run DIR: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runBMXEnv(t, []string{"PATH=" + t.TempDir()}, "slurm", "--submit", dir)
	if code != ExitInfra || !strings.Contains(stderr, "sbatch, squeue, scontrol not found on PATH") {
		t.Errorf("--submit DIR without Slurm: exit %d, want %d:\n%s", code, ExitInfra, stderr)
	}
	for _, args := range [][]string{{"slurm", dir}, {"slurm", "--submit", dir, "--nodes", "2"}} {
		if code, _, stderr := bmx(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d:\n%s", args, code, ExitUsage, stderr)
		}
	}
}

// TestSlurmSubmitWithoutSlurm: --submit on a host without Slurm's commands
// is refused before the job directory is written (exit 3, naming them).
// bmx runs as a process of its own, with nothing on its PATH.
func TestSlurmSubmitWithoutSlurm(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "jobs")
	code, _, stderr := runBMXEnv(t, []string{"PATH=" + t.TempDir()}, "slurm", "--nodes", "2", "--out", out, "--submit")
	if code != ExitInfra || !strings.Contains(stderr, "sbatch, squeue, scontrol not found on PATH") {
		t.Errorf("exit %d, want %d naming the missing commands:\n%s", code, ExitInfra, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(out)
		t.Errorf("a job directory was written before the submission failed: %v", entries)
	}
}
