package reports

import (
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
)

// TestNumericsSummaryForced: a cell compared on the reference's own tokens
// says so; one compared over the shared greedy prefix says what it always
// said.
func TestNumericsSummaryForced(t *testing.T) {
	d := 3
	probes := []classify.ProbeNumerics{{Probe: "a"}, {Probe: "b"}}
	for _, tc := range []struct {
		forced int
		want   string
	}{
		{0, "KL 0.25 nats/token over 56 tokens (threshold 0.002), first differing token at 3, largest at one position 0.5"},
		{2, "KL 0.25 nats/token over 56 of the reference's tokens, teacher-forced (threshold 0.002), first differing token at 3, largest at one position 0.5"},
		{1, "KL 0.25 nats/token over 56 tokens, 1 of 2 probes teacher-forced (threshold 0.002), first differing token at 3, largest at one position 0.5"},
	} {
		n := &classify.Numerics{KL: 0.25, MaxKL: 0.5, Compared: 56, FirstDiff: &d, Threshold: 0.002, Forced: tc.forced, Probes: probes}
		if got := numericsSummary(n); got != tc.want {
			t.Errorf("forced %d:\n got %s\nwant %s", tc.forced, got, tc.want)
		}
	}
}
