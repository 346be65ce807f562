package reports

import (
	"fmt"
	"math"

	"github.com/bmx-dev/bmx/evidence"
)

// PerfSlower is how much slower a cell must get to count as a performance
// regression (and faster as an improvement), on top of being outside the
// spread of both runs' requests.
const PerfSlower = 0.10

// PerfChange is a cell whose serving speed changed beyond noise between two
// runs, at one concurrency, by one figure: tokens/s per request (lower is
// slower) or time to first token (higher is slower).
type PerfChange struct {
	Cell        string          `json:"cell"`
	Kind        string          `json:"kind"` // PerfRegression or PerfImprovement
	Metric      string          `json:"metric"`
	Concurrency int             `json:"concurrency"`
	Base        evidence.Spread `json:"base"`
	New         evidence.Spread `json:"new"`
	// Change is the relative change of the median, new/base - 1.
	Change float64 `json:"change"`
}

// Performance figures a diff compares.
const (
	MetricTokensPerSecond = "tok/s per request"
	MetricTTFT            = "TTFT ms"
)

// perfChanges compares the cells measured in both runs (correct or
// degraded in both), at each concurrency both measured. A change counts
// when the median moved by more than PerfSlower and each run's median lies
// outside the other run's min-max spread: a difference the repeated
// requests of either run cannot explain.
func perfChanges(base, new *Report) []PerfChange {
	out := []PerfChange{}
	before := map[string]Result{}
	for _, r := range base.Results {
		if measured(r) {
			before[r.Cell.ID] = r
		}
	}
	for _, r := range new.Results {
		b, ok := before[r.Cell.ID]
		if !ok || !measured(r) {
			continue
		}
		for _, nl := range r.Perf.Levels {
			bl := b.Perf.Level(nl.Concurrency)
			if bl == nil || bl.Requests == 0 || nl.Requests == 0 {
				continue
			}
			add := func(metric string, bs, ns evidence.Spread, higherIsBetter bool) {
				if kind := perfKind(bs, ns, higherIsBetter); kind != "" {
					out = append(out, PerfChange{Cell: r.Cell.ID, Kind: kind, Metric: metric, Concurrency: nl.Concurrency,
						Base: bs, New: ns, Change: math.Round((ns.Median/bs.Median-1)*1000) / 1000})
				}
			}
			add(MetricTokensPerSecond, bl.TokensPerSecond, nl.TokensPerSecond, true)
			add(MetricTTFT, bl.TTFTMS, nl.TTFTMS, false)
		}
	}
	return out
}

// perfKind says whether going from base to new is a regression, an
// improvement, or noise ("").
func perfKind(base, new evidence.Spread, higherIsBetter bool) string {
	if base.Median <= 0 || new.Median <= 0 {
		return ""
	}
	outside := new.Median < base.Min && base.Median > new.Max || new.Median > base.Max && base.Median < new.Min
	if !outside || math.Abs(new.Median/base.Median-1) <= PerfSlower {
		return ""
	}
	if (new.Median > base.Median) == higherIsBetter {
		return PerfImprovement
	}
	return PerfRegression
}

// perfChangeHeader names the columns of a diff's performance table.
var perfChangeHeader = []string{"cell", "change", "figure", "concurrency", "base (min-max)", "new (min-max)", "median"}

// row is the change's line in a diff table, its cell cleaned by clean.
func (p PerfChange) row(clean func(string) string) []string {
	return []string{clean(p.Cell), p.Kind, p.Metric, fmt.Sprint(p.Concurrency), rankText(p.Base), rankText(p.New), fmt.Sprintf("%+.0f%%", p.Change*100)}
}
