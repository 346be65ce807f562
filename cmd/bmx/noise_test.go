package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/reports"
)

// TestFastestSurvivesRestart sweeps two simulated cells whose only
// difference is their speed, through real bmx sweeps (every cell its own
// server start): 2% apart, less than the default 5% between-start noise
// floor, no cell is crowned in any of two sweeps, and the report names
// both as tied; 30% apart, the faster one is crowned with how far ahead it
// is; with a probe file's noise_floor_pct = 50, the same 30% is within
// noise, so the setting reaches the report from the probe file.
func TestFastestSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	// 4 ms a token, not the sim's 1 ms: a wake-up a few milliseconds late
	// on a busy host moves a 64-token request's rate by a few percent, not
	// by tens.
	for name, latency := range map[string]string{"near": "4080us", "far": "5200us"} {
		simProfile(t, dir, name, `[speed]
first_token_latency = "4ms"
token_latency = "4ms"
[[rule]]
when = { fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "correct"
speed = { token_latency = "`+latency+`" }
`)
	}
	// Eight requests, one at a time (concurrency 1, the only level: the
	// report ranks at the highest level measured, and a level of four
	// would stream as many tokens again): a moment when the busy host holds
	// the sim up slows one request, and the median stands.
	probes := `[[probe]]
name = "ok"
prompt = "Say 'OK'"
expect = { contains = "OK" }

[perf]
requests = 8
concurrency = 1
`
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), probes)
	matrixtest.WriteFile(t, filepath.Join(dir, "wide.toml"), probes+"noise_floor_pct = 50\n")
	axes := []matrixtest.Axis{{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}}}
	cfg := profileConfig(t, dir, "speed", "", axes, "[probes]\nfile = \"probes.toml\"\n")
	wide := profileConfig(t, dir, "speed-wide", "", axes, "[probes]\nfile = \"wide.toml\"\n")
	const fast, slow = "fp4_gemm=flashinfer_cudnn", "fp4_gemm=flashinfer_cutlass"
	tests := []struct {
		name, cfg, profile string
		sweeps             int
		floor              float64
		// fastest is the crowned cell, "" when both must be within noise.
		fastest string
	}{
		{name: "2% apart, default floor", cfg: cfg, profile: "near", sweeps: 2, floor: 5},
		{name: "30% apart, default floor", cfg: cfg, profile: "far", sweeps: 1, floor: 5, fastest: fast},
		{name: "30% apart, a 50% floor", cfg: wide, profile: "far", sweeps: 1, floor: 50},
	}
	for _, tt := range tests {
		for i := range tt.sweeps {
			// Every sweep at once, the two of the 2% case too: their
			// servers mostly sleep between tokens, and the other tests of
			// this package wait for this one.
			t.Run(fmt.Sprintf("%s/sweep %d", tt.name, i+1), func(t *testing.T) {
				t.Parallel()
				out := t.TempDir()
				code, stdout, stderr := bmx(t, "sweep", "-c", tt.cfg, "--var", "profile="+tt.profile, "--out", out)
				if code != 0 {
					t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
				}
				perf := reportPerf(t, runDir(t, out))
				ranks := map[string]float64{}
				for _, c := range perf.Cells {
					ranks[c.Cell] = c.Rank.Median
				}
				t.Logf("%s %.1f, %s %.1f tok/s per request incl. TTFT: %.1f%% apart",
					fast, ranks[fast], slow, ranks[slow], 100*(ranks[fast]/ranks[slow]-1))
				if perf.NoiseFloorPct != tt.floor {
					t.Errorf("noise floor %g, want %g", perf.NoiseFloorPct, tt.floor)
				}
				if tt.fastest != "" {
					if perf.Fastest != tt.fastest || len(perf.WithinNoise) > 0 {
						t.Errorf("fastest %q, within noise %q; want %s crowned", perf.Fastest, perf.WithinNoise, tt.fastest)
					}
					if want := "\nfastest correct cell: " + tt.fastest + ","; !strings.Contains(stdout, want) || !strings.Contains(stdout, "ahead of "+slow) {
						t.Errorf("the output does not crown %s ahead of %s:\n%s", tt.fastest, slow, stdout)
					}
					return
				}
				if perf.Fastest != "" || !slices.Equal(slices.Sorted(slices.Values(perf.WithinNoise)), []string{fast, slow}) {
					t.Errorf("fastest %q, within noise %q; want both tied", perf.Fastest, perf.WithinNoise)
				}
				if !strings.Contains(stdout, "within noise, no single fastest correct cell: 2 correct cells tie") ||
					!strings.Contains(stdout, fast) || !strings.Contains(stdout, slow) || strings.Contains(stdout, "\nfastest correct cell:") {
					t.Errorf("the output does not say the cells tie:\n%s", stdout)
				}
			})
		}
	}
}

// reportPerf is the performance section of a run's report.json.
func reportPerf(t *testing.T, run string) *reports.Performance {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(run, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Performance *reports.Performance `json:"performance"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Performance == nil || len(rep.Performance.Cells) != 2 {
		t.Fatalf("%s: report.json's performance: %+v", run, rep.Performance)
	}
	return rep.Performance
}
