package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/record"
)

// Known-issue statuses of a cell.
const (
	XFail      = "XFAIL"      // a known issue, failing as expected
	XPass      = "XPASS"      // a known issue that now passes: a nightly fixed it
	Unexpected = "UNEXPECTED" // a failure no known issue covers
)

// failed reports whether v says the backend is broken (inconclusive is the
// harness's own failure, and skipped cells did not run).
func failed(v classify.Verdict) bool {
	switch v {
	case classify.Correct, classify.Inconclusive, classify.Skipped, classify.Excluded, classify.Predicted:
		return false
	}
	return true
}

// Status returns a result's known-issue status ("" for a passing cell no
// known issue covers) and the known issue that matched.
func Status(rep *record.Report, r record.Result) (string, *matrix.Known) {
	for i, k := range rep.Run.Known {
		if !k.Matches(r.Cell) {
			continue
		}
		switch {
		case r.Verdict == classify.Correct:
			return XPass, &rep.Run.Known[i]
		case failed(r.Verdict):
			return XFail, &rep.Run.Known[i]
		}
		return "", &rep.Run.Known[i]
	}
	if failed(r.Verdict) && len(rep.Run.Known) > 0 {
		return Unexpected, nil
	}
	return "", nil
}

// statusText is the status with the known issue's link and, when the cell
// fails differently from what was expected, both verdicts.
func statusText(rep *record.Report, r record.Result) string {
	st, k := Status(rep, r)
	if st == "" || k == nil {
		return st
	}
	if st == XFail && k.Verdict != "" && k.Verdict != string(r.Verdict) {
		st += fmt.Sprintf(" (expected %s)", k.Verdict)
	}
	if k.Issue != "" {
		st += " " + k.Issue
	}
	return st
}

// Cluster is one distinct cause of failure and the cells it hit.
type Cluster struct {
	Signature string           `json:"signature"`
	Verdict   classify.Verdict `json:"verdict"`
	Cells     []string         `json:"cells"`
}

// Clusters groups failed cells by their (normalised) signature, most cells
// first, so a report names each cause once.
func Clusters(rep *record.Report) []Cluster {
	var out []Cluster
	for _, r := range rep.Results {
		if r.Signature == "" || !failed(r.Verdict) {
			continue
		}
		i := slices.IndexFunc(out, func(c Cluster) bool { return c.Signature == r.Signature && c.Verdict == r.Verdict })
		if i < 0 {
			out = append(out, Cluster{Signature: r.Signature, Verdict: r.Verdict})
			i = len(out) - 1
		}
		out[i].Cells = append(out[i].Cells, r.Cell.ID)
	}
	slices.SortStableFunc(out, func(a, b Cluster) int { return len(b.Cells) - len(a.Cells) })
	if out == nil {
		out = []Cluster{}
	}
	return out
}

// ReferenceProblem says what the cells' agreement found wrong with the
// reference (the outlier, failed and replaced by the largest agreeing
// group, no yardstick at all, or agreeing cells that all share a value a
// fault in which would not show), or, with nothing to agree on, when the
// reference cell itself failed: then the probe set, the chat template or
// the model are suspect, not the backends.
func ReferenceProblem(rep *record.Report) string {
	failed := ""
	for _, r := range rep.Results {
		if rep.Run.Reference != "" && r.Cell.ID == rep.Run.Reference && r.Verdict != classify.Correct {
			failed = fmt.Sprintf("The reference cell %s is %s (%s): the probe set, the chat template or the model may be at fault rather than the backends.",
				r.Cell.ID, r.Verdict, r.Reason)
		}
	}
	a := rep.Agreement
	switch {
	case a == nil || a.Note == "" || a.Status == classify.RefUnconfirmed:
		return failed
	case a.Status == classify.RefConfirmed && len(a.Shared) == 0:
		return "" // nothing to warn of: the cells vouch for the reference
	case a.Status == classify.NoYardstick && failed != "":
		return failed + " " + sentence(a.Note)
	case a.Status == classify.RefBroken:
		r := rep.Result(rep.Run.Reference)
		if r != nil {
			return sentence(a.Note + fmt.Sprintf(" (the reference is %s: %s)", r.Verdict, r.Reason))
		}
	}
	return sentence(a.Note)
}

// sentence capitalises s and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// SameAs maps each cell whose server resolved its backends exactly as an
// earlier cell's did (two "auto"s that became the same kernels) to that
// earlier cell.
func SameAs(rep *record.Report) map[string]string {
	out := map[string]string{}
	for i, r := range rep.Results {
		if len(r.Resolved) == 0 {
			continue
		}
		for _, prev := range rep.Results[:i] {
			if maps.Equal(prev.Resolved, r.Resolved) {
				out[r.Cell.ID] = prev.Cell.ID
				break
			}
		}
	}
	return out
}
