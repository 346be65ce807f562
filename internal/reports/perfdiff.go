package reports

import (
	"fmt"
	"math"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// PerfSlower is how much slower a cell must get to count as a performance
// regression (and faster as an improvement), on top of the two runs'
// spreads not overlapping.
const PerfSlower = 0.10

// PerfTTFTFloorMS is the least change of the median time to first token
// that counts. Below it a TTFT difference is the host's scheduling, not
// the backend's: ten sweeps of three unchanged simulated cells on the
// 2-core machine with both cores kept busy gave TTFT medians up to 6.85 ms
// apart (more than 10%, the spreads apart) between two runs; quiet, none.
// A real server's TTFT is tens to hundreds of milliseconds, where 10 ms is
// below what anyone tunes for; a slower decode shows in tokens/s, which
// has no floor.
const PerfTTFTFloorMS = 10.0

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
// when the median moved by more than PerfSlower (and TTFT by more than
// PerfTTFTFloorMS) and the runs' min-max spreads do not overlap: every
// request of one run was slower than every request of the other, a
// difference the repeated requests of either run cannot explain. In the
// 45 pairs of those ten loaded sweeps, a weaker test (each median outside
// the other run's spread, no floor) flagged an unchanged cell in 30; this
// one in none.
func perfChanges(base, new *record.Report) []PerfChange {
	out := []PerfChange{}
	before := map[string]record.Result{}
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
			add := func(metric string, bs, ns evidence.Spread, higherIsBetter bool, floor float64) {
				if kind := perfKind(bs, ns, higherIsBetter, floor); kind != "" {
					out = append(out, PerfChange{Cell: r.Cell.ID, Kind: kind, Metric: metric, Concurrency: nl.Concurrency,
						Base: bs, New: ns, Change: math.Round((ns.Median/bs.Median-1)*1000) / 1000})
				}
			}
			add(MetricTokensPerSecond, bl.TokensPerSecond, nl.TokensPerSecond, true, 0)
			add(MetricTTFT, bl.TTFTMS, nl.TTFTMS, false, PerfTTFTFloorMS)
		}
	}
	return out
}

// perfKind says whether going from base to new is a regression, an
// improvement, or noise (""): the spreads apart, the medians more than
// PerfSlower and floor apart.
func perfKind(base, new evidence.Spread, higherIsBetter bool, floor float64) string {
	if base.Median <= 0 || new.Median <= 0 {
		return ""
	}
	apart := new.Max < base.Min || new.Min > base.Max
	if !apart || math.Abs(new.Median/base.Median-1) <= PerfSlower || math.Abs(new.Median-base.Median) <= floor {
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
