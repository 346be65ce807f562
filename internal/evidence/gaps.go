package evidence

import (
	"math"
	"math/bits"
	"slices"
)

// KeepGaps is how many gaps between chunks a request keeps one by one
// (PerfRequest.ITLUS): the default probe's 64 tokens make 63, and a
// request of 32768 tokens, or a stream that never ends, keeps no more.
const KeepGaps = 1024

// Gaps summarises the gaps between a stream's chunks with text, however
// many: the count, minimum, maximum and mean are exact; the percentiles are
// exact up to KeepGaps gaps and, past that, read from a histogram whose
// buckets are 1/32 of an octave wide (within 3% of the exact value).
type Gaps struct {
	Count  int64   `json:"count"`
	MinUS  int64   `json:"min_us"`
	P50US  int64   `json:"p50_us"`
	P90US  int64   `json:"p90_us"`
	P99US  int64   `json:"p99_us"`
	MaxUS  int64   `json:"max_us"`
	MeanUS float64 `json:"mean_us"`
	// Approx says the percentiles came from the histogram.
	Approx bool `json:"approx,omitempty"`
}

// gapSub is how many buckets each octave of the histogram has (a power of
// two): a value's bucket is its octave and its next 5 bits.
const (
	gapSubBits = 5
	gapSub     = 1 << gapSubBits
	gapBuckets = (64 - gapSubBits + 1) * gapSub
)

// GapRecorder takes a stream's gaps one at a time in fixed space: it keeps
// the first KeepGaps as they are and counts all of them in a histogram. Its
// zero value is ready to use.
type GapRecorder struct {
	kept          []int64
	count         int64
	sum, min, max int64
	hist          *[gapBuckets]int64
}

// Add records one gap, in microseconds (a negative one counts as 0).
func (g *GapRecorder) Add(us int64) {
	us = max(us, 0)
	if g.count == 0 || us < g.min {
		g.min = us
	}
	g.max = max(g.max, us)
	g.count++
	g.sum += us
	if len(g.kept) < KeepGaps {
		g.kept = append(g.kept, us)
		return
	}
	if g.hist == nil {
		g.hist = new([gapBuckets]int64)
		for _, v := range g.kept {
			g.hist[gapBucket(v)]++
		}
	}
	g.hist[gapBucket(us)]++
}

// Count is how many gaps were recorded.
func (g *GapRecorder) Count() int64 { return g.count }

// Kept returns the gaps kept one by one (the first KeepGaps) and the
// summary of all of them; nil and nil for none.
func (g *GapRecorder) Kept() ([]int64, *Gaps) {
	if g.count == 0 {
		return nil, nil
	}
	s := &Gaps{Count: g.count, MinUS: g.min, MaxUS: g.max, MeanUS: round3(float64(g.sum) / float64(g.count))}
	if g.hist == nil {
		v := make([]float64, len(g.kept))
		for i, us := range g.kept {
			v[i] = float64(us)
		}
		slices.Sort(v)
		at := func(p float64) int64 { return int64(math.Round(Percentile(v, p))) }
		s.P50US, s.P90US, s.P99US = at(50), at(90), at(99)
		return g.kept, s
	}
	s.Approx = true
	s.P50US, s.P90US, s.P99US = g.percentile(50), g.percentile(90), g.percentile(99)
	return g.kept, s
}

// percentile reads the p-th percentile off the histogram: the middle of
// the bucket that holds that rank, kept within the exact minimum and
// maximum.
func (g *GapRecorder) percentile(p float64) int64 {
	rank := int64(math.Ceil(p / 100 * float64(g.count)))
	seen := int64(0)
	for b, n := range g.hist {
		if seen += n; n > 0 && seen >= max(rank, 1) {
			lo, hi := gapBucketRange(b)
			return min(max(lo+(hi-lo)/2, g.min), g.max)
		}
	}
	return g.max
}

// gapBucket is the histogram bucket of a value: values below gapSub have a
// bucket each; above, a bucket is 1/gapSub of the value's octave.
func gapBucket(v int64) int {
	if v < gapSub {
		return int(v)
	}
	octave := bits.Len64(uint64(v)) - 1 // v's highest bit, at least gapSubBits
	sub := int(v>>(octave-gapSubBits)) & (gapSub - 1)
	return (octave-gapSubBits+1)*gapSub + sub
}

// gapBucketRange is the values [lo, hi] a bucket holds.
func gapBucketRange(b int) (lo, hi int64) {
	if b < gapSub {
		return int64(b), int64(b)
	}
	octave := b/gapSub - 1 + gapSubBits
	sub := int64(b % gapSub)
	width := int64(1) << (octave - gapSubBits)
	lo = int64(1)<<octave + sub*width
	return lo, lo + width - 1
}
