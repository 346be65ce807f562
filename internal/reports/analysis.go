package reports

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Known-issue statuses of a cell.
const (
	XFail      = "XFAIL"      // a known issue, failing as expected
	XPass      = "XPASS"      // a known issue that now passes: a nightly fixed it
	Unexpected = "UNEXPECTED" // a failure no known issue covers
	// KnownChanged is a known issue's cell that fails otherwise than its
	// entry expects (known to crash, garbage now): news, as an unexpected
	// failure is, since a silent wrong answer is worse than the crash the
	// entry excused.
	KnownChanged = "CHANGED"
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
// known issue covers) and the known issue that matched. A [[known]] entry
// excuses the verdict it expects (any failure when it names none): a cell
// it matches that fails otherwise is KnownChanged, with the first entry
// that matched.
func Status(rep *record.Report, r record.Result) (string, *matrix.Known) {
	var other *matrix.Known
	for i, k := range rep.Run.Known {
		if !k.Matches(r.Cell) {
			continue
		}
		switch {
		case r.Verdict == classify.Correct:
			return XPass, &rep.Run.Known[i]
		case !failed(r.Verdict):
			return "", &rep.Run.Known[i]
		case k.Verdict == "" || k.Verdict == string(r.Verdict):
			return XFail, &rep.Run.Known[i]
		}
		if other == nil {
			other = &rep.Run.Known[i]
		}
	}
	if other != nil {
		return KnownChanged, other
	}
	if failed(r.Verdict) && len(rep.Run.Known) > 0 {
		return Unexpected, nil
	}
	return "", nil
}

// statusText is the status with the known issue's link and, when the cell
// fails otherwise than its entry expects, both verdicts.
func statusText(rep *record.Report, r record.Result) string {
	st, k := Status(rep, r)
	if st == "" || k == nil {
		return st
	}
	if st == KnownChanged {
		st += fmt.Sprintf(" (known %s, %s now)", k.Verdict, r.Verdict)
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
	type cause struct {
		signature string
		verdict   classify.Verdict
	}
	index := map[cause]int{} // each cause's place in out
	for _, r := range rep.Results {
		if r.Signature == "" || !failed(r.Verdict) {
			continue
		}
		i, ok := index[cause{r.Signature, r.Verdict}]
		if !ok {
			i = len(out)
			index[cause{r.Signature, r.Verdict}] = i
			out = append(out, Cluster{Signature: r.Signature, Verdict: r.Verdict})
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
// group, no yardstick at all or a baseline run's in its place, or agreeing
// cells that all share a value a fault in which would not show), or, with
// nothing to agree on, when the reference cell itself failed: then the
// probe set, the chat template or the model are suspect, not the backends.
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
	case a.Status == classify.RefConfirmed && len(a.Shared) == 0 && len(a.Groups) == 1 && !a.Groups[0].Explained():
		return "" // nothing to warn of: the cells vouch for the reference, and no group disagrees
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

// maxChangedNamed bounds the cells AgreementChanges names.
const maxChangedNamed = 8

// AgreementChanges says which verdicts the agreement among cells changed
// ("" for none): a sweep prints each cell's verdict as the cell ends,
// judged against the configured reference, before the cells' agreement
// chose the yardstick (or found none, or took a baseline run's).
func AgreementChanges(rep *record.Report) string {
	n := len(rep.Changed)
	if n == 0 {
		return ""
	}
	var parts []string
	for _, c := range rep.Changed[:min(n, maxChangedNamed)] {
		parts = append(parts, fmt.Sprintf("%s %s -> %s", c.Cell, c.From, c.To))
	}
	if n > maxChangedNamed {
		parts = append(parts, fmt.Sprintf("and %d more", n-maxChangedNamed))
	}
	noun := "verdicts"
	if n == 1 {
		noun = "verdict"
	}
	return fmt.Sprintf("%d %s changed after the agreement among cells (the line each cell printed as it ended came before it): %s", n, noun, strings.Join(parts, "; "))
}

// sentence capitalises s and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	if !strings.HasPrefix(s, "bmx ") { // bmx is lower-case, even first
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s + "."
}

// SameAs maps each cell whose server resolved its backends exactly as an
// earlier cell's did (two "auto"s that became the same kernels) to that
// earlier cell. Cells are grouped by their resolved backends in one pass:
// a sweep of 10,000 cells that all resolve differently costs 10,000 map
// look-ups, not 50 million comparisons.
func SameAs(rep *record.Report) map[string]string {
	out := map[string]string{}
	first := map[string]string{} // resolved backends as a key -> the first cell with them
	for _, r := range rep.Results {
		if len(r.Resolved) == 0 {
			continue
		}
		key := resolvedKey(r.Resolved)
		if prev, ok := first[key]; ok {
			out[r.Cell.ID] = prev
			continue
		}
		first[key] = r.Cell.ID
	}
	return out
}

// resolvedKey is resolved backends as one string, equal for equal maps:
// the keys in order, each key and value quoted.
func resolvedKey(resolved map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(resolved)) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(resolved[k]))
		b.WriteByte(',')
	}
	return b.String()
}
