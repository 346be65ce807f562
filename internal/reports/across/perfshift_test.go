package across

import (
	"fmt"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// perfAt is a measurement of tps tokens/s per request (1% spread) at
// concurrency 1.
func perfAt(tps float64) *evidence.Perf {
	var runs []evidence.PerfRequest
	for _, f := range []float64{-1, -0.3, 0.3, 1} {
		rate := tps * (1 + f/100)
		e2e := int64(64 / rate * 1e6)
		ttft := e2e / 20
		runs = append(runs, evidence.PerfRequest{TTFTUS: ttft, ITLUS: []int64{(e2e - ttft) / 63}, E2EUS: e2e,
			OutputTokens: 64, PromptTokens: 131, Usage: true, Chunks: 64, FinishReason: "length"})
	}
	wall := time.Duration(runs[3].E2EUS) * time.Microsecond * 4
	return &evidence.Perf{PromptTokens: 128, OutputTokens: 64, IgnoreEOS: true,
		Levels: []evidence.PerfLevel{evidence.SummarizeLevel(1, 64, runs, wall)}}
}

// TestPerfShiftIgnoresSpikes: a run slowed by a busy host, one run only,
// is no change of speed (neither the drop into it nor the rise out of
// it); a drop that holds is, at the run it came with.
func TestPerfShiftIgnoresSpikes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rates []float64
		want  int // the run of the shift, -1 for none
	}{
		{"a spike", []float64{900, 905, 400, 902, 898}, -1},
		{"a spike in the last run but one", []float64{900, 905, 898, 400, 902}, -1},
		{"a lasting drop, then a spike", []float64{900, 905, 200, 198, 90, 201}, 2},
		{"a drop in the last run", []float64{900, 905, 898, 200}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dirs []string
			var reps []*record.Report
			for i, rate := range tc.rates {
				run := &record.Run{Name: "p", Started: time.Date(2026, 3, 1+i, 0, 0, 0, 0, time.UTC), Host: record.Host{Hostname: "gpu"}}
				r := record.Result{Cell: matrix.Cell{ID: "a"}, Verdict: classify.Correct, Perf: perfAt(rate), Classifier: classify.Fingerprint()}
				dirs = append(dirs, fmt.Sprintf("runs/%d", i))
				reps = append(reps, &record.Report{Run: run, Results: []record.Result{r}})
			}
			c := NewHistory(dirs, reps).Cells[0]
			got := -1
			if c.PerfShift != nil {
				got = c.PerfShift.Run
			}
			if got != tc.want {
				t.Errorf("shift at run %d (%+v), want %d", got, c.PerfShift, tc.want)
			}
		})
	}
}
