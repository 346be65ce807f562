package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishBisects: through real bmx processes, a verdict bisect of the
// built-in host that finds the crash from version 6, then one of the same
// cell whose ends do not differ (it finds nothing), and a perf bisect.
// publish draws the first bisect's finding, names the later one that found
// nothing, and says what the perf bisect found (its bad side slower), not
// all green.
func TestPublishBisects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	const crashes, slows = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--cell", crashes, "--along", "sim_version=4,5,6,7"}, ExitOK},
		{[]string{"--cell", crashes, "--along", "sim_version=1,2,3"}, ExitFailed},
		{[]string{"--cell", slows, "--along", "sim_version=3,4,5,6", "--perf"}, ExitOK},
	} {
		if code, _, stderr := runBMX(t, append([]string{"bisect", "-q", "--out", runs}, tc.args...)...); code != tc.code {
			t.Fatalf("bisect %v: exit %d, want %d\n%s", tc.args, code, tc.code, stderr)
		}
	}
	all, _ := filepath.Glob(filepath.Join(runs, "*"))
	site := filepath.Join(dir, "site")
	code, stdout, stderr := runBMX(t, append([]string{"publish", "--out", site}, all...)...)
	if code != ExitOK {
		t.Fatalf("publish: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"by verdict: of 2 run(s), the latest with a finding",
		"bisect on a verdict change: first bad sim_version=6 (last good: 5): crash",
		"found nothing: it ended with no finding",
		"(2 slower: the bad side of the bisect)",
		"bisect on a performance drop: first bad sim_version=5 (last good: 4)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("publish does not say %q:\n%s", want, stdout)
		}
	}
	index, err := os.ReadFile(filepath.Join(site, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), `class="v v-perf-bad"`) || !strings.Contains(string(index), "first bad sim_version=6") {
		t.Errorf("index.html lacks the perf bisect's slower steps or the verdict bisect's finding")
	}
}
