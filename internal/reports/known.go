package reports

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// knownNoteMax bounds the note a written [[known]] entry carries: the
// cause's first line, enough to recognise it.
const knownNoteMax = 120

// KnownTOML writes, ready to paste into the config, a [[known]] entry for
// each failure of the run that no [[known]] entry covers: the failures
// sweep --fail-on unexpected fails on. An axis value the blame table holds
// to blame (every cell of it failed, of one cause) gets one entry matching
// the value; every other failure one matching its cell. The known issues
// whose cells pass now (XPASS) are listed as comments, to remove.
func KnownTOML(w io.Writer, rep *record.Report) error { return KnownTOMLWith(w, rep, nil) }

// KnownTOMLWith is KnownTOML against a baseline run (nil: none): a cell
// correct there and failing now is a regression to fix, never excused, so
// no entry is proposed that matches it (nor an axis value's entry over it);
// it is listed as a comment instead. A known issue's cell that fails
// otherwise than its entry expects is listed so too: news, not an entry
// to widen silently.
func KnownTOMLWith(w io.Writer, rep, baseline *record.Report) error {
	var b strings.Builder
	done := map[string]bool{}
	regressed := map[string]bool{}
	if baseline != nil {
		before := map[string]bool{}
		for _, r := range baseline.Results {
			before[r.Cell.ID] = r.Verdict == classify.Correct
		}
		for _, r := range rep.Results {
			if before[r.Cell.ID] && failed(r.Verdict) {
				regressed[r.Cell.ID] = true
			}
		}
	}
	var entries []string
	for _, bl := range BlameOf(rep).Values {
		if !bl.ToBlame {
			continue
		}
		var cells []record.Result
		for _, r := range rep.Results {
			if v, ok := r.Cell.Value(bl.Axis); ok && v == bl.Value && failed(r.Verdict) {
				cells = append(cells, r)
			}
		}
		if len(cells) == 0 || anyCovered(rep, cells) || done[cells[0].Cell.ID] ||
			slices.ContainsFunc(cells, func(r record.Result) bool { return regressed[r.Cell.ID] }) {
			continue
		}
		for _, r := range cells {
			done[r.Cell.ID] = true
		}
		entries = append(entries, knownEntry(fmt.Sprintf("%s=%s: every one of its %d cells failed so", bl.Axis, bl.Value, len(cells)),
			[]matrix.AxisValue{{Axis: bl.Axis, Value: bl.Value}}, cells[0]))
	}
	for _, r := range rep.Results {
		if done[r.Cell.ID] || !failed(r.Verdict) || covered(rep, r) || regressed[r.Cell.ID] {
			continue
		}
		done[r.Cell.ID] = true
		entries = append(entries, knownEntry("", r.Cell.Values, r))
	}
	name := record.Clean(rep.Run.Name)
	news := len(regressed) > 0 || slices.ContainsFunc(rep.Results, func(r record.Result) bool { st, _ := Status(rep, r); return st == KnownChanged })
	switch {
	case len(entries) == 0 && news:
		fmt.Fprintf(&b, "# No [[known]] entry to propose for the run %s: the failures listed below are news, not known issues.\n", name)
	case len(entries) == 0:
		fmt.Fprintf(&b, "# Every failure of the run %s has a [[known]] entry: nothing to add.\n", name)
	default:
		fmt.Fprintf(&b, "# [[known]] entries for the %d failing cells of the run %s that no entry covers\n", len(done), name)
		b.WriteString("# (bmx report RUN --format known). Paste them into the config and fill in each issue:\n")
		b.WriteString("# bmx sweep --fail-on unexpected then fails only on what is new.\n")
	}
	for _, e := range entries {
		b.WriteString("\n" + e)
	}
	for _, r := range rep.Results {
		if regressed[r.Cell.ID] {
			fmt.Fprintf(&b, "\n# REGRESSION: %s was correct in the baseline %s and is %s now: fix it; no entry is proposed to excuse it\n",
				record.Clean(r.Cell.ID), record.Clean(baseline.Run.Name), r.Verdict)
		}
		if st, k := Status(rep, r); st == KnownChanged {
			fmt.Fprintf(&b, "\n# CHANGED: %s is %s now where the entry matching %s expects %s: news, not proposed as an entry\n",
				record.Clean(r.Cell.ID), r.Verdict, record.Clean(mapText(k.Match)), record.Clean(k.Verdict))
		}
	}
	for _, r := range rep.Results {
		if st, k := Status(rep, r); st == XPass {
			fmt.Fprintf(&b, "\n# XPASS: %s passes now; the entry matching %s can go", record.Clean(r.Cell.ID), record.Clean(mapText(k.Match)))
			if k.Issue != "" {
				fmt.Fprintf(&b, " (%s)", record.Clean(k.Issue))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// anyCovered reports whether a [[known]] entry covers one of the cells.
func anyCovered(rep *record.Report, cells []record.Result) bool {
	for _, r := range cells {
		if covered(rep, r) {
			return true
		}
	}
	return false
}

// knownEntry is one [[known]] block matching values, with r's verdict and
// cause; why, when set, is a comment above it.
func knownEntry(why string, values []matrix.AxisValue, r record.Result) string {
	var b strings.Builder
	if why != "" {
		fmt.Fprintf(&b, "# %s\n", record.Clean(why))
	}
	pairs := make([]string, len(values))
	for i, v := range values {
		pairs[i] = matrix.TOMLKey(v.Axis) + " = " + matrix.QuoteTOML(v.Value)
	}
	b.WriteString("[[known]]\n")
	fmt.Fprintf(&b, "match = { %s }\n", strings.Join(pairs, ", "))
	fmt.Fprintf(&b, "verdict = %s\n", matrix.QuoteTOML(string(r.Verdict)))
	cause := r.Signature
	if cause == "" {
		cause = r.Reason
	}
	if cause, _, _ = strings.Cut(record.Clean(cause), "\n"); cause != "" {
		fmt.Fprintf(&b, "note = %s\n", matrix.QuoteTOML(clip(cause, knownNoteMax)))
	}
	b.WriteString("issue = \"\"  # the bug's URL\n")
	return b.String()
}
