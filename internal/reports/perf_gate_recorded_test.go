package reports

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// perfGateRunsDir holds the recorded runs TestPerfRegressionGate reads:
// base and after, sweeps of three backends of the simulated host before
// and after an upgrade that makes one four times slower per token
// (perfGateRuns makes them with -update).
var perfGateRunsDir = filepath.Join("testdata", "perfgate")

// perfGateRuns builds bmx, writes the config "perf" (one axis, three FP4
// GEMM backends) and the profiles before and after (cutlass's tokens 1 ms,
// then 4 ms apart), sweeps it at each, and records the run directories as
// out/base and out/after, replacing what was there (recordRunDir).
func perfGateRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	for name, slow := range map[string]string{"before": "1ms", "after": "4ms"} {
		matrixtest.Profile{Name: name, Startup: "50ms", Body: `[speed]
first_token_latency = "4ms"
token_latency = "1ms"
[[rule]]
when = { fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "correct"
speed = { token_latency = "` + slow + `" }
`}.Write(t, filepath.Join(work, name+".toml"))
	}
	cfg := matrixtest.Config{Name: "perf", Head: `reference = { fp4_gemm = "flashinfer_cudnn" }`, Vars: map[string]string{"profile": "before"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/{profile}.toml"}, ReadyTimeout: "30s"},
		Axes:   []matrixtest.Axis{{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl"}}},
	}.Write(t, filepath.Join(work, "perf.toml"))
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ name, profile string }{{"base", "before"}, {"after", "after"}} {
		runs := filepath.Join(work, s.name)
		if b, err := exec.Command(bmx, "sweep", "-c", cfg, "--out", runs, "-q", "--var", "profile="+s.profile).CombinedOutput(); err != nil {
			t.Fatalf("sweep %s: %v\n%s", s.name, err, b)
		}
		dirs, _ := filepath.Glob(filepath.Join(runs, "*"))
		if len(dirs) != 1 {
			t.Fatalf("%d run directories under %s, want 1", len(dirs), runs)
		}
		recordRunDir(t, dirs[0], filepath.Join(out, s.name))
	}
}

// TestPerfRegressionGate is the nightly job's performance gate on the
// recorded runs (testdata/perfgate; go test ./internal/reports -run
// TestPerfRegressionGate -update sweeps them again): the same three
// backends before and after an upgrade that makes one of them four times
// slower per token. The table of the run before has the performance
// section and a recommendation; the gate on perf-regression against the
// baseline names the slowed cell by its tokens/s, and so does the JUnit
// of the gated run; the diff reports the slowdown, its header counting
// perf-regressions as the gate does; the reverse diff calls it an
// improvement.
func TestPerfRegressionGate(t *testing.T) {
	t.Parallel()
	if *update {
		perfGateRuns(t, perfGateRunsDir)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(perfGateRunsDir)); err != nil {
		t.Fatal(err)
	}
	base, err := record.Load(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatalf("%v (go test ./internal/reports -run TestPerfRegressionGate -update makes the runs)", err)
	}
	after, err := record.Load(filepath.Join(dir, "after"))
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := Table(&table, base); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"performance: streamed chat completions", "tok/s", "--fp4-gemm-backend flashinfer_"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, &table)
		}
	}
	// A recommendation either crowns a cell or says the cells are within
	// noise (the three are equally fast here, but a loaded machine can
	// part their spreads: TestPerformance checks which is said when).
	if !strings.Contains(table.String(), "within noise") && !strings.Contains(table.String(), "fastest correct cell") {
		t.Errorf("no fastest cell or within-noise line:\n%s", &table)
	}

	const slowed = "fp4_gemm=flashinfer_cutlass"
	g, err := Gate(after, []string{PerfRegression}, base)
	if err != nil {
		t.Fatal(err)
	}
	gate := strings.Join(g.Summary(SummaryOptions{}), "\n")
	if !g.Failed() || !strings.Contains(gate, slowed+": perf-regression (tok/s per request at concurrency") {
		t.Fatalf("the gate must name the slowed cell by its tokens/s:\n%s", gate)
	}
	// The unchanged cells are not there: the recorded runs are fixed. (A
	// loaded host can make one look slower while they are recorded; how
	// often is measured apart, reports/perfdiff.go: record them again.)
	if !strings.HasPrefix(gate, "--fail-on perf-regression: 1 of 3 cells failed the gate") {
		t.Errorf("the gate names more than the slowed cell (-update on a quieter machine records them again):\n%s", gate)
	}
	var junit bytes.Buffer
	if err := JUnitGated(&junit, after, base, g); err != nil {
		t.Fatal(err)
	}
	var suites junitRead
	if err := xml.Unmarshal(junit.Bytes(), &suites); err != nil || len(suites.Suites) != 1 {
		t.Fatalf("not JUnit XML: %v\n%s", err, &junit)
	}
	for _, c := range suites.Suites[0].Cases {
		if strings.Contains(c.Name, slowed) && (c.Failure == nil || c.Failure.Type != "perf-regression" ||
			!strings.Contains(c.Failure.Message, "fails the gate --fail-on perf-regression: perf-regression (tok/s per request at concurrency")) {
			t.Errorf("the slowed cell is not a failing test case saying why: %+v\n%s", c.Failure, &junit)
		}
	}

	var diff bytes.Buffer
	if err := DiffTable(&diff, Compare(base, after)); err != nil {
		t.Fatal(err)
	}
	// The diff's header counts cells as the gate does: the slowed cell is
	// slower in tokens/s and at each concurrency, one perf-regression.
	header, _, _ := strings.Cut(diff.String(), "\n")
	if m := regexp.MustCompile(`cells by kind: (\d+) perf-regression`).FindStringSubmatch(gate); m == nil ||
		!strings.Contains(header, " "+m[1]+" perf-regression") {
		t.Errorf("the diff's header and the gate count perf-regressions apart:\n%s\n%s", header, gate)
	}
	if !strings.Contains(diff.String(), "perf-regression") || !strings.Contains(diff.String(), slowed) {
		t.Errorf("the diff does not report the slowed cell:\n%s", &diff)
	}
	// The reverse diff is an improvement of the slowed cell, not a
	// regression.
	diff.Reset()
	if err := DiffTable(&diff, Compare(after, base)); err != nil {
		t.Fatal(err)
	}
	back, err := Gate(base, []string{PerfRegression}, after)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(linesWith(diff.String(), slowed), "perf-improvement") || strings.Contains(strings.Join(back.Lines(), "\n"), slowed+": perf-regression") {
		t.Errorf("reverse diff: want the slowed cell a perf-improvement\n%s%s", &diff, strings.Join(back.Lines(), "\n"))
	}
}

// linesWith are the lines of text that contain s, joined.
func linesWith(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
