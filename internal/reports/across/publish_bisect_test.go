package across

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// bisectRunsDir holds the recorded bisects TestPublishBisects publishes
// (bisectRuns makes them with -update).
var bisectRunsDir = filepath.Join("testdata", "bisects")

// The built-in simulated host's cells the recorded bisects follow: one
// crashes from version 6 on, one decodes five times slower from 5 on.
const (
	bisectCrashes = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
	bisectSlows   = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
)

// bisectRuns builds bmx and runs three real bisects of the built-in
// simulated host, one after another: a verdict bisect that finds the
// crash from version 6, then one of the same cell whose ends do not
// differ (it finds nothing, exit 1), and a perf bisect; it records their
// run directories under out, replacing what was there (matrixtest.RecordRun: no
// reports or summary, each log's end).
func bisectRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	runs := filepath.Join(work, "runs")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--cell", bisectCrashes, "--along", "sim_version=4,5,6,7"}, 0},
		{[]string{"--cell", bisectCrashes, "--along", "sim_version=1,2,3"}, 1},
		{[]string{"--cell", bisectSlows, "--along", "sim_version=3,4,5,6", "--perf"}, 0},
	} {
		cmd := exec.Command(bmx, append([]string{"bisect", "-q", "--out", runs}, tc.args...)...)
		b, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != tc.code {
			t.Fatalf("bisect %v: %v, want exit %d\n%s", tc.args, err, tc.code, b)
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

// TestPublishBisects publishes the recorded bisects (testdata/bisects; go
// test ./internal/reports/across -run TestPublishBisects -update bisects
// again) as bmx publish does: the verdict bisect's grid draws its finding
// (crash from version 6) and names the later bisect of the cell that found
// nothing; the perf bisect's grid says what it found, its bad side slower,
// not all green.
func TestPublishBisects(t *testing.T) {
	t.Parallel()
	if *update {
		bisectRuns(t, bisectRunsDir)
	}
	dir := t.TempDir()
	// A copy: loading a run writes its summary beside it.
	if err := os.CopyFS(filepath.Join(dir, "runs"), os.DirFS(bisectRunsDir)); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	if len(runs) != 3 {
		t.Fatalf("%d recorded bisects under %s, want 3 (go test ./internal/reports/across -run TestPublishBisects -update makes them)", len(runs), bisectRunsDir)
	}
	var sums []*record.Summary
	for _, r := range runs {
		s, err := record.LoadSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	site, err := PublishOf(filepath.Join(dir, "site"), sums)
	if err != nil {
		t.Fatal(err)
	}
	grids := map[string]siteGrid{}
	var lines []string
	for _, h := range site.Hosts {
		for _, g := range h.Grids {
			mode := g.Config[strings.LastIndex(g.Config, " by ")+4:]
			grids[mode] = g
			lines = append(lines, fmt.Sprintf("%s: %d run(s): %s: %s | %s | %s", g.Config, g.Runs, g.Summary, g.Finding, g.Later, g.Aborted))
		}
	}
	all := strings.Join(lines, "\n")
	v, p := grids[record.BisectVerdict], grids[record.BisectPerf]
	if len(grids) != 2 || v.Runs != 2 || v.Finding == "" || p.Runs != 1 {
		t.Fatalf("want a grid of the 2 verdict bisects drawing the one with a finding, and one of the perf bisect:\n%s", all)
	}
	for _, c := range []struct{ got, want string }{
		{v.Config, bisectCrashes + " by verdict"},
		{v.Finding, "bisect on a verdict change: first bad sim_version=6 (last good: 5): crash"},
		{v.Later, "found nothing: it ended with no finding"},
		{p.Summary, "(2 slower: the bad side of the bisect)"},
		{p.Finding, "bisect on a performance drop: first bad sim_version=5 (last good: 4)"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("publish does not say %q:\n%s", c.want, all)
		}
	}
	index := string(readSite(t, filepath.Join(dir, "site", "index.html")))
	for _, want := range []string{`class="v v-perf-bad"`, "first bad sim_version=6", "of 2 run(s), the latest with a finding"} {
		if !strings.Contains(index, want) {
			t.Errorf("index.html lacks %q (the perf bisect's slower steps, the verdict bisect's finding)", want)
		}
	}
}
