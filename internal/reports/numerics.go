package reports

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// numericsSummary is a cell's comparison with the reference in words:
// "KL 0.243 nats/token over 56 tokens (threshold 0.01), first differing
// token at 12, largest at one position 0.51"; "over 56 of the reference's
// tokens, teacher-forced" when the cell's server scored the reference's
// answers (classify.ForcedNumerics).
func numericsSummary(n *classify.Numerics) string {
	threshold := n.Threshold
	if threshold == 0 {
		threshold = classify.DegradedKL
	}
	over := fmt.Sprintf("%d tokens", n.Compared)
	switch {
	case n.Forced > 0 && n.Forced == len(n.Probes):
		over = fmt.Sprintf("%d of the reference's tokens, teacher-forced", n.Compared)
	case n.Forced > 0:
		over = fmt.Sprintf("%d tokens, %d of %d probes teacher-forced", n.Compared, n.Forced, len(n.Probes))
	}
	s := fmt.Sprintf("KL %s nats/token over %s (threshold %g), ", formatKL(n.KL), over, threshold)
	if n.FirstDiff != nil {
		s += fmt.Sprintf("first differing token at %d", *n.FirstDiff)
	} else {
		s += "same greedy tokens"
	}
	return s + fmt.Sprintf(", largest at one position %s", formatKL(n.MaxKL))
}

// formatKL writes a divergence with three significant digits.
func formatKL(kl float64) string {
	if kl == 0 {
		return "0"
	}
	return strconv.FormatFloat(kl, 'g', 3, 64)
}

// firstDiffText is a first differing position, or "-" for none.
func firstDiffText(d *int) string {
	if d == nil {
		return "-"
	}
	return strconv.Itoa(*d)
}

// probeLabel names a compared request: "count", or "batch #3" for one of
// a batch.
func probeLabel(p classify.ProbeNumerics) string {
	if p.Request > 0 {
		return fmt.Sprintf("%s #%d", p.Probe, p.Request+1)
	}
	return p.Probe
}

// degradedLegend explains the degraded verdict under a grid that shows it.
func degradedLegend(rep *record.Report) string {
	if !slices.ContainsFunc(rep.Results, func(r record.Result) bool { return r.Verdict == classify.Degraded }) {
		return ""
	}
	return fmt.Sprintf("degraded = the answers pass, but the greedy top-k logprobs diverge from the reference cell's by more than %g nats/token (KL)", classify.DegradedKL)
}
