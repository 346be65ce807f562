package across

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// groupRunsDir holds the recorded runs TestHistoryGroups reads: runs of
// two configs of the simulated host, one of them stopped by a broken
// setup (groupRuns makes them with -update).
var groupRunsDir = filepath.Join("testdata", "groups")

// groupConfig is a config of the simulated host with no nvidia-smi (no
// GPU), named name, its server given profile as --sim-profile.
const groupConfig = `name = %q
[vars]
sim_version = "1"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}", "--sim-profile", %q, "--sim-version", "{sim_version}"]
versions_command = ["{self}", "sim-server", "--print-versions", "--sim-version", "{sim_version}"]
ready_timeout = "10s"
[probes]
file = "probes.toml"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm"]
`

// groupRuns builds bmx and sweeps, one sweep after another: config hist
// at versions 1 and 2, hist with a profile that is not there (its first
// cell's server refuses its command line and the sweep stops there, exit
// 3), hist at 3, and config other at 1; it records the run directories
// under out, replacing what was there (matrixtest.RecordRun).
func groupRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	write := func(path, text string) string {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	profile := write(filepath.Join(work, "profile.toml"), matrixtest.AcrossProfile)
	write(filepath.Join(work, "probes.toml"), matrixtest.LightProbes)
	hist := write(filepath.Join(work, "hist.toml"), fmt.Sprintf(groupConfig, "hist", profile))
	broken := write(filepath.Join(work, "broken.toml"), fmt.Sprintf(groupConfig, "hist", "nope.toml"))
	other := write(filepath.Join(work, "other.toml"), fmt.Sprintf(groupConfig, "other", profile))
	runs := filepath.Join(work, "runs")
	for _, s := range []struct {
		cfg     string
		version int
		code    int
	}{{hist, 1, 0}, {hist, 2, 0}, {broken, 1, 3}, {hist, 3, 0}, {other, 1, 0}} {
		cmd := exec.Command(bmx, "sweep", "-q", "-c", s.cfg, "--out", runs, "--var", fmt.Sprintf("sim_version=%d", s.version))
		b, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != s.code || (s.code == 3 && !strings.Contains(string(b), "the setup is broken")) {
			t.Fatalf("sweep of %s at %d: %v, want exit %d\n%s", s.cfg, s.version, err, s.code, b)
		}
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(runs, "*"))
	for _, d := range dirs {
		if err := matrixtest.RecordRun(d, filepath.Join(out, filepath.Base(d))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryGroups renders the history of recorded runs of two configs,
// one run of which stopped on a broken setup (testdata/groups; go test
// ./internal/reports/across -run TestHistoryGroups -update sweeps them
// again), as bmx history does: one titled table per config, the stopped
// run's setup cell no crash and no reason to call a cell flaky, and the
// stopped run named.
func TestHistoryGroups(t *testing.T) {
	t.Parallel()
	if *update {
		groupRuns(t, groupRunsDir)
	}
	dir := t.TempDir()
	// A copy: loading a run writes its summary beside it.
	if err := os.CopyFS(dir, os.DirFS(groupRunsDir)); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(runs) != 5 {
		t.Fatalf("%d recorded runs under %s, want 5 (go test ./internal/reports/across -run TestHistoryGroups -update makes them)", len(runs), groupRunsDir)
	}
	shuffled := slices.Clone(runs)
	slices.Reverse(shuffled)
	var sums []*record.Summary
	for _, r := range shuffled {
		s, err := record.LoadSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	hs, err := HistoriesOf(sums)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := RenderHistories(&b, hs, "table"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	hist, other := strings.Index(out, "== hist on no GPU on "), strings.Index(out, "== other on no GPU on ")
	if hist < 0 || other < hist {
		t.Fatalf("want a titled table for hist, then one for other:\n%s", out)
	}
	histTable, otherTable := out[hist:other], out[other:]
	flip := "moe_runner=flashinfer_cutlass"
	if line := linesWith(histTable, flip+"  "); !strings.Contains(line, "✓✓·✓") || strings.Contains(line, "FLAKY") {
		t.Errorf("hist: the stopped run's setup cell counted as a verdict: %s", line)
	}
	if !strings.Contains(histTable, "history of 3 cells over 4 runs") || !strings.Contains(otherTable, "history of 3 cells over 1 runs") {
		t.Errorf("runs not grouped by config:\n%s", out)
	}
	if !strings.Contains(histTable, "(stopped on a broken setup after "+flip+": the cells it did not finish are not counted)") {
		t.Errorf("hist does not say which run stopped on a broken setup:\n%s", histTable)
	}
	for _, h := range hs {
		if h.Config == "hist" && (len(h.Runs) != 4 || h.Runs[0].Dir != runs[0]) {
			t.Errorf("hist: %d runs, first %s; want 4 in time order, first %s", len(h.Runs), h.Runs[0].Dir, runs[0])
		}
	}
}
