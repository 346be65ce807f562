package evidence

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		values []float64
		p      float64
		want   float64
	}{
		{[]float64{5}, 50, 5},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 90, 3.7},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 10, 2},
		{[]float64{1, 2}, 0, 1},
		{[]float64{1, 2}, 100, 2},
	}
	for _, tt := range tests {
		if got := Percentile(tt.values, tt.p); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Percentile(%v, %g) = %g, want %g", tt.values, tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("no values: want NaN")
	}
}

func TestSpread(t *testing.T) {
	s := SpreadOf([]float64{4, 1, 3, 2})
	if d := cmp.Diff(Spread{Min: 1, P10: 1.3, Median: 2.5, P90: 3.7, Max: 4}, s); d != "" {
		t.Error(d)
	}
	for _, tt := range []struct {
		a, b Spread
		want bool
	}{
		{Spread{Min: 1, Max: 2}, Spread{Min: 2, Max: 3}, true},
		{Spread{Min: 1, Max: 2}, Spread{Min: 2.1, Max: 3}, false},
		{Spread{Min: 3, Max: 5}, Spread{Min: 1, Max: 4}, true},
		{Spread{Min: 3, Max: 5}, Spread{Min: 3.5, Max: 4}, true},
	} {
		if got := tt.a.Overlaps(tt.b); got != tt.want || tt.b.Overlaps(tt.a) != tt.want {
			t.Errorf("%+v overlaps %+v: %v", tt.a, tt.b, got)
		}
	}
}

// TestSummarizeLevel checks a level's figures count only answered
// requests, take tokens from usage, and flag short answers.
func TestSummarizeLevel(t *testing.T) {
	runs := []PerfRequest{
		{TTFTUS: 10_000, ITLUS: []int64{1000, 2000}, E2EUS: 100_000, OutputTokens: 10, Usage: true, Chunks: 3},
		{TTFTUS: 20_000, ITLUS: []int64{3000}, E2EUS: 200_000, OutputTokens: 10, Usage: true, Chunks: 2},
		// Answered with fewer tokens than asked.
		{TTFTUS: 30_000, E2EUS: 50_000, OutputTokens: 5, Usage: true, Chunks: 40},
		{Err: "connection refused", ErrKind: Connection},
	}
	l := SummarizeLevel(2, 10, runs, 250*time.Millisecond)
	if l.Requests != 3 || l.Failed != 1 || l.Short != 1 {
		t.Errorf("requests %d failed %d short %d", l.Requests, l.Failed, l.Short)
	}
	if l.TTFTMS.Median != 20 || l.TTFTMS.Min != 10 || l.TTFTMS.Max != 30 {
		t.Errorf("ttft %+v", l.TTFTMS)
	}
	// TPOT is (e2e - TTFT) / (tokens - 1) of each request: 90/9, 180/9,
	// 20/4 ms, whatever the gaps between chunks were.
	if l.TPOTMS.Min != 5 || l.TPOTMS.Median != 10 || l.TPOTMS.Max != 20 {
		t.Errorf("tpot %+v", l.TPOTMS)
	}
	if l.DecodeTokensPerSecond.Min != 50 || l.DecodeTokensPerSecond.Median != 100 || l.DecodeTokensPerSecond.Max != 200 {
		t.Errorf("decode tokens/s %+v", l.DecodeTokensPerSecond)
	}
	// 10 tokens in 0.1 s, 10 in 0.2 s, 5 in 0.05 s; 25 tokens in 0.25 s.
	if l.TokensPerSecond.Min != 50 || l.TokensPerSecond.Median != 100 || l.TokensPerSecond.Max != 100 || l.TotalTokensPerSecond != 100 {
		t.Errorf("tokens/s %+v total %g", l.TokensPerSecond, l.TotalTokensPerSecond)
	}
	noUsage := PerfRequest{E2EUS: 1000, Chunks: 10}
	if _, ok := noUsage.TPOTMS(); noUsage.TokensPerSecond() != 0 || ok {
		t.Error("without usage the token count is unknown, not the chunk count")
	}
	if _, ok := (&PerfRequest{TTFTUS: 10, E2EUS: 20, OutputTokens: 1, Usage: true}).TPOTMS(); ok {
		t.Error("one token has no time per output token after the first")
	}
}

// TestPerfLevelLegacyJSON reads a level as runs wrote it before TPOT: its
// tokens_per_s is the rate TTFT included, and TPOT comes from its requests.
func TestPerfLevelLegacyJSON(t *testing.T) {
	old := `{"concurrency":1,"requests":1,"ttft_ms":{"min":10,"p10":10,"median":10,"p90":10,"max":10},"itl_median_ms":1.5,
		"tokens_per_s":{"min":100,"p10":100,"median":100,"p90":100,"max":100},"total_tokens_per_s":100,"wall_ms":100,
		"runs":[{"ttft_us":10000,"e2e_us":100000,"output_tokens":10,"usage":true,"chunks":10}]}`
	var l PerfLevel
	if err := json.Unmarshal([]byte(old), &l); err != nil {
		t.Fatal(err)
	}
	if l.TokensPerSecond.Median != 100 || l.TPOTMS.Median != 10 || l.DecodeTokensPerSecond.Median != 100 || l.Requests != 1 || len(l.Runs) != 1 {
		t.Errorf("legacy level read as %+v", l)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"tokens_per_s_incl_ttft":`) || !strings.Contains(s, `"tpot_ms":`) || strings.Contains(s, "itl_median") || strings.Contains(s, `"tokens_per_s":`) {
		t.Errorf("written as %s", s)
	}
}

func TestPerfLevels(t *testing.T) {
	p := &Perf{Levels: []PerfLevel{{Concurrency: 1, Requests: 4}, {Concurrency: 8, Requests: 0, Failed: 8}}}
	if p.Top().Concurrency != 1 {
		t.Errorf("top %+v: a level with no answers is not ranked", p.Top())
	}
	if p.Level(8) == nil || p.Level(2) != nil || (*Perf)(nil).Top() != nil {
		t.Error("Level")
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Perf
	if err := json.Unmarshal(b, &back); err != nil || len(back.Levels) != 2 {
		t.Errorf("round trip: %v %s", err, b)
	}
}
