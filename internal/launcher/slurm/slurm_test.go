package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

const slotsConfig = `name = "slots"
reference = { moe = "a" }
[server]
command = ["{self}", "sim-server", "--host", "{host}", "--port", "{port}"]
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["a", "b", "c", "d", "e"]
[[slot]]
gpus = "0,1"
[[slot]]
gpus = "2,3"
`

func plan(t *testing.T, src string) Plan {
	t.Helper()
	cfg, err := matrix.Parse("m.toml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	return Plan{Config: cfg, Plan: p}
}

func TestTaskGPUs(t *testing.T) {
	noSlots := strings.Split(slotsConfig, "[[slot]]")[0]
	tests := []struct {
		name        string
		src         string
		gpusPerNode int
		want        int
		wantErr     string
	}{
		{name: "slots name the GPUs", src: slotsConfig, want: 4},
		{name: "slots within the node", src: slotsConfig, gpusPerNode: 8, want: 4},
		{name: "slots beyond the node", src: slotsConfig, gpusPerNode: 2, wantErr: "use 4 GPUs (0,1,2,3), more than --gpus-per-node 2"},
		{name: "no slots: the node's", src: noSlots, gpusPerNode: 8, want: 8},
		{name: "no slots, no GPUs", src: noSlots, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TaskGPUs(plan(t, tt.src).Config, tt.gpusPerNode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("TaskGPUs = %d, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("TaskGPUs = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	out := t.TempDir()
	opts := Options{Config: "m.toml", Vars: []string{"model=/models/a b"}, Only: []string{"moe=a", "moe=b", "moe=c"}, MaxCells: 100000,
		Nodes: 2, Partition: "gpu", Time: "12:00:00", Bmx: "/opt/bmx/bmx", Out: out}
	p := plan(t, slotsConfig)
	if err := p.Plan.Filter(p.Config, opts.Only); err != nil {
		t.Fatal(err)
	}
	j, err := Create(opts, p, time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j.Dir, out) || !strings.HasSuffix(j.Dir, "-slots-slurm") {
		t.Errorf("job directory %s", j.Dir)
	}
	// a and b, c: the reference a in both shards.
	if d := cmp.Diff([]int{2, 2}, j.Sizes); d != "" {
		t.Errorf("sizes (-want +got):\n%s", d)
	}
	again, err := Load(j.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(j, again); d != "" {
		t.Errorf("job.json read back (-wrote +read):\n%s", d)
	}
	shards, err := os.ReadFile(filepath.Join(j.Dir, ShardsScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#SBATCH --array=0-1\n", "#SBATCH --gpus-per-task=4\n", "#SBATCH --partition=gpu\n", "#SBATCH --time=12:00:00\n",
		"#SBATCH --requeue\n", "#SBATCH --output=" + filepath.Join(j.Dir, "slurm", "shard-%a-%A.out") + "\n",
		// The shard count is written in: a resubmitted shard is an array of one.
		`--out "$out" --shard "$i/2"`,
		"/opt/bmx/bmx sweep --quiet -c " + filepath.Join(mustWd(t), "m.toml") + " --var 'model=/models/a b' --max-cells 100000 --only moe=a --only moe=b --only moe=c",
		// A resume passes the vars again: secrets are not in run.json.
		`/opt/bmx/bmx sweep --quiet --var 'model=/models/a b' --max-cells 100000 --resume "$prev"`,
	} {
		if !strings.Contains(string(shards), want) {
			t.Errorf("%s lacks %q:\n%s", ShardsScript, want, shards)
		}
	}
	merge, err := os.ReadFile(filepath.Join(j.Dir, MergeScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#SBATCH --partition=gpu\n", "/opt/bmx/bmx merge \"${runs[@]}\" -o " + j.MergedDir()} {
		if !strings.Contains(string(merge), want) {
			t.Errorf("%s lacks %q:\n%s", MergeScript, want, merge)
		}
	}
	if strings.Contains(string(merge), "gpus") {
		t.Errorf("the merge asks for GPUs:\n%s", merge)
	}
}

func mustWd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestProgress reads shards' progress from their run directories as a
// sweep leaves them: finished, cut short, not started.
func TestProgress(t *testing.T) {
	p := plan(t, slotsConfig)
	j, err := Create(Options{Nodes: 3, Bmx: "bmx", Out: t.TempDir()}, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write := func(i int, ended bool, done int) {
		pl := *p.Plan
		a := pl.KeepShard(matrix.Shard{Index: i, Count: 3})
		dir := filepath.Join(j.ShardDir(i), "20260310T120000Z-slots-shard")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		run := &record.Run{Name: "slots", ConfigPath: "slots.toml", Config: slotsConfig, Cells: len(pl.Cells), Started: time.Now()}
		if ended {
			run.Ended = time.Now()
		}
		if err := record.WriteRun(dir, run); err != nil {
			t.Fatal(err)
		}
		if err := record.WriteShard(dir, record.ShardRecord{Shard: matrix.Shard{Index: i, Count: 3}, Assignment: a}); err != nil {
			t.Fatal(err)
		}
		store, err := record.OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pl.Cells[:done] {
			if err := store.Append(record.Result{Cell: c, Verdict: classify.Correct}); err != nil {
				t.Fatal(err)
			}
		}
		store.Close()
	}
	write(0, true, j.Sizes[0])
	write(1, true, j.Sizes[1]-1) // ended without its last cell: interrupted, or a cell's store write failed
	// Shard 2 never started.
	if got := j.Progress(0); !got.Finished() || got.Done != j.Sizes[0] {
		t.Errorf("shard 0: %+v, want finished", got)
	}
	if got := j.Progress(1); got.Finished() || got.Done != j.Sizes[1]-1 {
		t.Errorf("shard 1: %+v, want %d done, unfinished", got, j.Sizes[1]-1)
	}
	if got := j.Progress(2); got.Finished() || got.Run != "" || got.Cells != j.Sizes[2] {
		t.Errorf("shard 2: %+v, want no run, %d cells", got, j.Sizes[2])
	}
	if d := cmp.Diff([]int{1, 2}, j.Unfinished()); d != "" {
		t.Errorf("unfinished (-want +got):\n%s", d)
	}
}

func TestSecretVarsNeverWritten(t *testing.T) {
	j := &Job{Name: "n", Shards: 2, Bmx: "/opt/bmx/bmx", Dir: "/jobs/j"}
	vars := []string{"model=/models/a", "hf_token=hf_abcdefghijklmnopqrstuvwx", "header=Bearer sk-abcdefghijklmnopqrstu"}
	script := j.ShardsScript(vars)
	for _, secret := range []string{"hf_abcdefghijklmnopqrstuvwx", "sk-abcdefghijklmnopqrstu"} {
		if strings.Contains(script, secret) {
			t.Errorf("the script holds %q:\n%s", secret, script)
		}
	}
	if !strings.Contains(script, `--var "hf_token=${BMX_VAR_HF_TOKEN:?`) || !strings.Contains(script, "--var model=/models/a") {
		t.Errorf("vars not passed on:\n%s", script)
	}
	env := SecretEnv(vars)
	if len(env) != 2 || env[0] != "BMX_VAR_HF_TOKEN=hf_abcdefghijklmnopqrstuvwx" || env[1] != "BMX_VAR_HEADER=Bearer sk-abcdefghijklmnopqrstu" {
		t.Errorf("env %q", env)
	}
}
