package evidence

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGapRecorder: up to KeepGaps gaps the summary is exact and every gap
// kept; past that the count, minimum, maximum and mean stay exact, the
// percentiles are within 3% of the exact ones, and no more gaps are kept.
func TestGapRecorder(t *testing.T) {
	var none GapRecorder
	if kept, s := none.Kept(); kept != nil || s != nil {
		t.Errorf("no gaps: %v, %+v", kept, s)
	}

	var few GapRecorder
	for _, us := range []int64{30, 10, 20, -5} {
		few.Add(us)
	}
	kept, s := few.Kept()
	want := &Gaps{Count: 4, MinUS: 0, P50US: 15, P90US: 27, P99US: 30, MaxUS: 30, MeanUS: 15}
	if !cmp.Equal(kept, []int64{30, 10, 20, 0}) || !cmp.Equal(s, want) {
		t.Errorf("kept %v, summary %+v; want %+v", kept, s, want)
	}

	for _, tt := range []struct {
		name string
		gen  func(*rand.Rand) int64
	}{
		{"steady, 1 ms", func(r *rand.Rand) int64 { return 1000 + r.Int64N(50) }},
		{"bursty", func(r *rand.Rand) int64 {
			if r.IntN(4) == 0 {
				return 0 // chunks read together
			}
			return int64(r.ExpFloat64() * 20000)
		}},
		{"wide", func(r *rand.Rand) int64 { return int64(math.Exp(r.Float64() * 25)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var g GapRecorder
			var all []float64
			sum := int64(0)
			for range 200_000 {
				us := tt.gen(rng)
				g.Add(us)
				all = append(all, float64(us))
				sum += us
			}
			kept, s := g.Kept()
			slices.Sort(all)
			if len(kept) != KeepGaps || s.Count != int64(len(all)) || s.MinUS != int64(all[0]) || s.MaxUS != int64(all[len(all)-1]) ||
				s.MeanUS != round3(float64(sum)/float64(len(all))) || !s.Approx {
				t.Errorf("%d kept, summary %+v", len(kept), s)
			}
			for _, p := range []struct {
				got int64
				pct float64
			}{{s.P50US, 50}, {s.P90US, 90}, {s.P99US, 99}} {
				exact := Percentile(all, p.pct)
				if d := math.Abs(float64(p.got) - exact); d > 0.03*exact+1 {
					t.Errorf("p%g %d, exact %.0f", p.pct, p.got, exact)
				}
			}
		})
	}
}

// TestGapBuckets: every value falls in the bucket whose range holds it, and
// the buckets are at most 1/32 of their values wide.
func TestGapBuckets(t *testing.T) {
	for _, v := range []int64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		b := gapBucket(v)
		lo, hi := gapBucketRange(b)
		if b < 0 || b >= gapBuckets || v < lo || v > hi || float64(hi-lo) > float64(lo)/gapSub {
			t.Errorf("%d: bucket %d holds [%d, %d]", v, b, lo, hi)
		}
	}
}
