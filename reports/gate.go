package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/record"
)

// Gate outcomes --fail-on may name besides verdicts: what a nightly job
// gates on is what is new, not what is known.
const (
	GateUnexpected = "unexpected" // a failure no known issue covers
	GateXPass      = "xpass"      // a known issue that now passes: remove the workaround
	GateRegression = "regression" // correct in the baseline run, failing now
	// GatePerfRegression is a cell served slower than in the baseline run,
	// beyond 10% and outside both runs' spread (see PerfChange).
	GatePerfRegression = PerfRegression
)

// GateKinds are the words --fail-on takes besides verdict names.
var GateKinds = []string{GateUnexpected, GateXPass, GateRegression, GatePerfRegression}

// NeedsBaseline reports whether gate kind k compares with a baseline run.
func NeedsBaseline(k string) bool { return k == GateRegression || k == GatePerfRegression }

// ValidGate reports whether k is a verdict or a gate kind.
func ValidGate(k string) bool {
	return classify.Verdict(k).Valid() || slices.Contains(GateKinds, k)
}

// Gate returns, for each cell that trips one of kinds, a line naming the
// cell and why: a verdict named in kinds, "unexpected", "xpass", or
// "regression" or "perf-regression" against baseline (nil: no baseline,
// and asking for either is an error).
func Gate(rep *record.Report, kinds []string, baseline *record.Report) ([]string, error) {
	var out []string
	if against := slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return !NeedsBaseline(k) }); len(against) > 0 {
		if baseline == nil {
			return nil, fmt.Errorf("--fail-on %s needs --baseline RUN", strings.Join(against, ","))
		}
		out = append(out, Compare(baseline, rep).Lines(against...)...)
	}
	for _, r := range rep.Results {
		st, _ := Status(rep, r)
		switch {
		case slices.Contains(kinds, string(r.Verdict)):
			out = append(out, fmt.Sprintf("%s: %s", r.Cell.ID, r.Verdict))
		case slices.Contains(kinds, GateUnexpected) && st == Unexpected:
			out = append(out, fmt.Sprintf("%s: unexpected %s", r.Cell.ID, r.Verdict))
		case slices.Contains(kinds, GateXPass) && st == XPass:
			out = append(out, fmt.Sprintf("%s: xpass (a known issue now passes)", r.Cell.ID))
		}
	}
	return out, nil
}

// NewsLine leads a job summary: the unexpected failures and the known
// issues that now pass, or that there is nothing new.
func NewsLine(rep *record.Report) string {
	var unexpected, xpass []string
	for _, r := range rep.Results {
		switch st, _ := Status(rep, r); st {
		case Unexpected:
			unexpected = append(unexpected, fmt.Sprintf("%s (%s)", r.Cell.ID, r.Verdict))
		case XPass:
			xpass = append(xpass, r.Cell.ID)
		}
	}
	if len(unexpected) == 0 && len(xpass) == 0 {
		if len(rep.Run.Known) == 0 {
			return ""
		}
		return "Nothing new: every failure is a known issue, and every known issue still fails."
	}
	var parts []string
	if len(unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("%d unexpected failure(s): %s", len(unexpected), strings.Join(unexpected, "; ")))
	}
	if len(xpass) > 0 {
		parts = append(parts, fmt.Sprintf("%d known issue(s) now pass (XPASS): %s", len(xpass), strings.Join(xpass, "; ")))
	}
	return "New: " + strings.Join(parts, ". ") + "."
}
