package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/launcher/slurm"
	"github.com/bmx-dev/bmx/internal/reports"
)

// slurmForTest makes sure this machine's Slurm runs, through the project's
// own script (.ci/slurm.sh start, which never installs here:
// BMX_SLURM_NO_INSTALL=1; .ci/run installs it), and returns its SLURM_CONF.
// A Slurm the test started is stopped when the test ends. Where Slurm cannot
// start (not root, packages missing) the test says why and skips; in CI,
// where .ci/run installs and starts it, it fails instead.
func slurmForTest(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", ".ci", "slurm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(arg string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, arg)
		cmd.Env = append(os.Environ(), "BMX_SLURM_NO_INSTALL=1")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := run("start")
	if err != nil {
		testenv.Skip(t, "Slurm cannot start here: %s (run .ci/slurm.sh start as root; CI runs it before the tests)", out)
	}
	var conf string
	if strings.Contains(out, "started") {
		t.Cleanup(func() {
			// The daemons' pid files, read before stop removes them.
			pids := daemonPids(filepath.Join(filepath.Dir(filepath.Dir(conf)), "run"))
			done := make(chan struct{})
			reaped := make(chan struct{})
			go func() { reapDaemons(pids, done); close(reaped) }()
			out, err := run("stop")
			close(done)
			<-reaped
			if err != nil {
				t.Errorf(".ci/slurm.sh stop: %v: %s", err, out)
			}
		})
	}
	env, err := run("env")
	var ok bool
	conf, ok = strings.CutPrefix(env, "SLURM_CONF=")
	if err != nil || !ok {
		t.Fatalf(".ci/slurm.sh env: %v: %q", err, env)
	}
	return conf
}

// daemonPids reads the pids of the Slurm daemons (munged, slurmctld,
// slurmd) from the pid files in dir.
func daemonPids(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var pids []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// reapDaemons reaps those of pids that are this process's children until
// each is reaped or not a child, or done is closed. A sweep run in this
// process (bmx(t, "sweep", ...)) makes it a child subreaper (launcher/server
// adopts orphans), so the daemons .ci/slurm.sh start left behind are its
// children; nothing else reaps them, and each stopped daemon stayed a zombie
// that stop's kill -0 took for alive until its 10 s grace was over (30-45 s
// a stop, against 2 s where the test process was no subreaper). Only these
// pids are waited for, so no exit status os/exec waits for is taken.
func reapDaemons(pids []int, done <-chan struct{}) {
	for len(pids) > 0 {
		left := pids[:0]
		for _, pid := range pids {
			var ws syscall.WaitStatus
			if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got != pid && err == nil {
				left = append(left, pid)
			}
		}
		pids = left
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// buildSlurmBMX copies this test binary into a temporary directory as
// "bmx", the name under which it runs as bmx (TestMain): Slurm's tasks run it
// as a program of their own, and a copy costs no build.
func buildSlurmBMX(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(t.TempDir(), "bmx")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// slurmBMX is the bmx that Slurm's tasks run and the Slurm it talks to (its
// SLURM_CONF), passed to each process rather than set in this one's
// environment, so the test runs beside the others.
type slurmBMX struct{ bin, conf string }

type slurmBMXProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	took           time.Duration
}

// startSlurmBMX runs the built bmx in the background.
func startSlurmBMX(ctx context.Context, t *testing.T, sb slurmBMX, args ...string) *slurmBMXProc {
	t.Helper()
	p := &slurmBMXProc{cmd: exec.CommandContext(ctx, sb.bin, args...)}
	p.cmd.Env = append(os.Environ(), "SLURM_CONF="+sb.conf)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *slurmBMXProc) wait(t *testing.T) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(p.cmd.Args, " "), err, p.stdout.String(), p.stderr.String())
	}
	p.took += time.Since(start)
}

// TestSlurmShardedSweep is the end-to-end test of a sweep over Slurm: the
// built-in simulated host (on its faster clock: fastBuiltin) in 3 shards through bmx slurm --submit on this
// machine's real Slurm (a job array and a merge job), whose merged verdicts
// must equal a sweep of the same config on one host, cell for cell.
func TestSlurmShardedSweep(t *testing.T) {
	t.Parallel()
	sb := slurmBMX{bin: buildSlurmBMX(t), conf: slurmForTest(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jobs, single := t.TempDir(), t.TempDir()
	cfg := fastBuiltin(t, t.TempDir(), "sim-sm120", "")

	// Both at once: the one-host sweep is what the shards must agree with.
	// It runs 3 cells at a time, as the 3 shards do, so that it takes no
	// longer than they do: the slots change when a cell runs, not its
	// verdict.
	start := time.Now()
	sharded := startSlurmBMX(ctx, t, sb, "slurm", "-c", cfg, "--nodes", "3", "--out", jobs, "--submit", "--poll", "1s")
	whole := startSlurmBMX(ctx, t, sb, "sweep", "-c", cfg, "--out", single, "--quiet", "--slots", "3")
	t.Cleanup(func() { cancelSlurmJobs(t, jobs, sb.conf) })
	sharded.wait(t)
	t.Logf("bmx slurm --submit (3 shards, merge): %s", time.Since(start).Round(100*time.Millisecond))
	whole.wait(t)
	t.Logf("bmx sweep on one host, alongside: %s", time.Since(start).Round(100*time.Millisecond))

	dir := runDir(t, jobs)
	for _, want := range []string{"bmx: submitted shards 0,1,2 as job", "merge: pending (Dependency)", "bmx: merged report " + filepath.Join(dir, "merged", "report.md")} {
		if !strings.Contains(sharded.stderr.String(), want) {
			t.Errorf("bmx slurm's stderr lacks %q:\n%s", want, sharded.stderr.String())
		}
	}
	if !strings.Contains(sharded.stdout.String(), `moe_runner \ fp4_gemm`) {
		t.Errorf("bmx slurm printed no merged table:\n%s", sharded.stdout.String())
	}
	m, err := reports.ReadMerged(filepath.Join(dir, "merged"))
	if err != nil {
		t.Fatal(err)
	}
	one, err := record.Load(runDir(t, single))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(slurmVerdicts(one), slurmVerdicts(m.Report)); d != "" {
		t.Errorf("merged verdicts differ from one host's (-one host +merged):\n%s%s", d, howEnded(one, m.Report))
	}
	if !m.Complete() || len(m.Runs) != 3 || len(m.Hosts) != 1 || len(m.Reference) != 3 || len(m.Duplicates) != 0 {
		t.Errorf("merge: complete %v, %d runs, %d hosts, reference in %d shards, %d duplicates; want 3 shards of one host, the reference in each",
			m.Complete(), len(m.Runs), len(m.Hosts), len(m.Reference), len(m.Duplicates))
	}
	for i := range 3 {
		shard := filepath.Join(dir, "shard-"+string(rune('0'+i)))
		run := runDir(t, shard)
		if rec, err := record.ReadShard(run); err != nil || rec == nil || rec.Shard.Index != i || rec.Shard.Count != 3 {
			t.Errorf("shard %d: shard.json %+v, %v", i, rec, err)
		}
		if r, err := record.ReadRun(run); err != nil || r.Host.Hostname == "" {
			t.Errorf("shard %d: no host fingerprint in run.json: %v", i, err)
		}
	}

	// An interrupted follow goes on from the Slurm job ID, while Slurm
	// still remembers the job.
	j, err := slurm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := j.Last()
	follow := startSlurmBMX(ctx, t, sb, "slurm", "--follow", sub.Array, "--poll", "1s")
	follow.wait(t)
	if !strings.Contains(follow.stderr.String(), "bmx: merged report "+filepath.Join(dir, "merged", "report.md")) {
		t.Errorf("bmx slurm --follow %s:\n%s", sub.Array, follow.stderr.String())
	}

	// Shard 1 lost a cell (as if killed before recording it): --resume
	// finds it unfinished and resubmits it alone; its task resumes the
	// shard's run, runs that cell again, and a new merge replaces the old.
	lost := dropResult(t, runDir(t, j.ShardDir(1)), one.Run.Reference)
	resume := startSlurmBMX(ctx, t, sb, "slurm", "--resume", dir, "--poll", "1s")
	resume.wait(t)
	t.Logf("bmx slurm --resume (shard 1, cell %s): %s", lost, resume.took.Round(100*time.Millisecond))
	if !strings.Contains(resume.stderr.String(), "bmx: submitted shards 1 as job") {
		t.Errorf("bmx slurm --resume did not resubmit shard 1 alone:\n%s", resume.stderr.String())
	}
	if j, err = slurm.Load(dir); err != nil {
		t.Fatal(err)
	}
	sub, _ = j.Last()
	if out, err := os.ReadFile(j.ShardOutput(1, sub.Array)); err != nil || !strings.Contains(string(out), "resuming") {
		t.Errorf("shard 1's task did not resume its run: %v\n%s", err, out)
	}
	if m, err = reports.ReadMerged(filepath.Join(dir, "merged")); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(slurmVerdicts(one), slurmVerdicts(m.Report)); d != "" || !m.Complete() {
		t.Errorf("after the resubmission, merged verdicts differ from one host's (-one host +merged):\n%s%s", d, howEnded(one, m.Report))
	}
}

// dropResult removes one result that is not the reference's (a crash: it
// runs again fast) from a shard's results.jsonl and returns its cell.
func dropResult(t *testing.T, run, reference string) string {
	t.Helper()
	path := filepath.Join(run, record.ResultsFile)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := record.ReadResults(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	drop := -1
	for i, r := range results {
		if r.Cell.ID != reference && (drop < 0 || r.Verdict == "crash") {
			drop = i
		}
	}
	if drop < 0 {
		t.Fatalf("%s has no result to drop", path)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(mustRead(t, path)), "\n"), "\n")
	kept := append(lines[:drop:drop], lines[drop+1:]...)
	text := strings.Join(kept, "")
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return results[drop].Cell.ID
}

// slurmVerdicts are a report's verdicts and signatures by cell.
// howEnded says, for each cell whose verdict differs between two reports,
// how its server ended in each and what the harness noted: the evidence
// for who killed what, where the run directories are gone with the test.
func howEnded(a, b *record.Report) string {
	va, vb := slurmVerdicts(a), slurmVerdicts(b)
	var out strings.Builder
	for _, rep := range []*record.Report{a, b} {
		for _, r := range rep.Results {
			if va[r.Cell.ID] != vb[r.Cell.ID] {
				fmt.Fprintf(&out, "%s in %s: exit %+v, stop %q, problems %q, log tail %q\n", r.Cell.ID, rep.Run.Name, r.Exit, r.Stop, r.Problems, r.LogTail)
			}
		}
	}
	return out.String()
}

func slurmVerdicts(rep *record.Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		out[r.Cell.ID] = r.Shown() + " " + r.Signature
	}
	return out
}

// cancelSlurmJobs cancels every Slurm job a test's job directories submitted,
// so a failed test leaves nothing queued.
func cancelSlurmJobs(t *testing.T, out, conf string) {
	dirs, _ := filepath.Glob(filepath.Join(out, "*", slurm.JobFile))
	for _, f := range dirs {
		j, err := slurm.Load(filepath.Dir(f))
		if err != nil {
			continue
		}
		for _, s := range j.Submissions {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cmd := exec.CommandContext(ctx, "scancel", s.Array, s.Merge)
			cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Logf("scancel %s %s: %v: %s", s.Array, s.Merge, err, out)
			}
			cancel()
		}
	}
}
