package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Words --fail-on takes besides verdicts, in sweep and diff alike: what a
// nightly job gates on is what is new, not what is known.
const (
	GateUnexpected = "unexpected" // a failure no [[known]] entry excuses
	GateXPass      = "xpass"      // a known issue that now passes: remove the workaround
	GateRegression = Regression   // correct in the baseline run, failing now
	// GatePerfRegression is a cell served slower than in the baseline run,
	// beyond 10% and outside both runs' spread (see PerfChange).
	GatePerfRegression = PerfRegression
)

// GateWord is a word --fail-on takes besides a verdict.
type GateWord struct {
	Name string
	// Help says what trips it, for --help and the error of a wrong word.
	Help string
	// Baseline marks a word that compares the run with a baseline run:
	// sweep's --baseline RUN, diff's BASE.
	Baseline bool
}

// GateWords are every word --fail-on takes besides verdicts: the one list
// that sweep and diff check, that their --help prints and their errors
// name.
var GateWords = []GateWord{
	{GateUnexpected, "a failure no [[known]] entry excuses: none matches the cell, or those that do expect another verdict", false},
	{GateXPass, "a [[known]] entry's cell that passes now", false},
	{Regression, "correct in the baseline, failing now", true},
	{Fix, "failing in the baseline, correct now", true},
	{YardstickLost, "degraded or wrong in the baseline against its yardstick, correct now where no yardstick can judge it: not a fix", true},
	{Changed, "another verdict than in the baseline, neither of those", true},
	{Added, "a cell the baseline does not have", true},
	{Removed, "a cell only the baseline has", true},
	{PerfRegression, "served slower than in the baseline, beyond 10% and both runs' spread", true},
	{PerfImprovement, "served faster than in the baseline, likewise", true},
}

// GateVerdicts are the verdicts --fail-on takes: a cell of one of them
// trips the gate, known issue or not. Predicted cells never trip a gate.
var GateVerdicts = append(slices.Clone(classify.Verdicts), classify.Skipped)

// NeedsBaseline reports whether gate word k compares with a baseline run.
func NeedsBaseline(k string) bool {
	i := slices.IndexFunc(GateWords, func(w GateWord) bool { return w.Name == k })
	return i >= 0 && GateWords[i].Baseline
}

// ValidGate reports whether k is a verdict or a gate word --fail-on takes.
func ValidGate(k string) bool {
	return slices.Contains(GateVerdicts, classify.Verdict(k)) || slices.ContainsFunc(GateWords, func(w GateWord) bool { return w.Name == k })
}

// ParseGates checks --fail-on's words, each a verdict or one of
// GateWords, and returns them in order without repeats.
func ParseGates(words []string) ([]string, error) {
	var out []string
	for _, w := range words {
		w = strings.TrimSpace(w)
		if !ValidGate(w) {
			var names []string
			for _, g := range GateWords {
				names = append(names, g.Name)
			}
			return nil, fmt.Errorf("--fail-on %q: not a verdict (one of %s) nor one of %s", w, gateVerdictList(), strings.Join(names, ", "))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, nil
}

func gateVerdictList() string {
	vs := make([]string, len(GateVerdicts))
	for i, v := range GateVerdicts {
		vs[i] = string(v)
	}
	return strings.Join(vs, ", ")
}

// GateUsage is --fail-on's help: every word it takes and what trips it;
// baseline names what the baseline words compare with ("--baseline RUN",
// "BASE").
func GateUsage(baseline string) string {
	var own, against []string
	for _, w := range GateWords {
		s := fmt.Sprintf("%s (%s)", w.Name, w.Help)
		if w.Baseline {
			against = append(against, s)
		} else {
			own = append(own, s)
		}
	}
	return fmt.Sprintf("a verdict (%s); %s; against %s: %s", gateVerdictList(), strings.Join(own, "; "), baseline, strings.Join(against, "; "))
}

// Trip is one reason a cell trips a gate.
type Trip struct {
	Cell string
	// Word is the --fail-on word that tripped.
	Word string
	// Text says why: "crash", "unexpected garbage", "regression (correct
	// before, crash now)".
	Text string
}

func (t Trip) String() string { return t.Cell + ": " + t.Text }

// GateResult is what --fail-on found in a run.
type GateResult struct {
	Words []string
	// Cells counts the run's cells; Baseline names the baseline run ("":
	// none).
	Cells    int
	Baseline string
	// Trips are in the run's cell order, a removed cell's last.
	Trips []Trip
	// fresh marks the cells that trip in a way the baseline did not show:
	// a flip or a performance change, or a verdict the baseline did not
	// have for the cell.
	fresh map[string]bool
	// cause is a tripping cell's signature or reason, for its line.
	cause map[string]string
}

// Failed reports whether any cell tripped the gate.
func (g *GateResult) Failed() bool { return len(g.Trips) > 0 }

// Lines are the trips, one line each: "cell: why".
func (g *GateResult) Lines() []string {
	out := make([]string, len(g.Trips))
	for i, t := range g.Trips {
		out[i] = t.String()
	}
	return out
}

// Gate returns, for each cell of rep that trips one of words, why: a
// verdict named in words, "unexpected", "xpass", or one of the baseline
// words against baseline (nil: no baseline, and asking for one of those
// is an error). sweep --fail-on gates a run against its --baseline, diff
// --fail-on NEW against BASE: the same words mean the same.
func Gate(rep *record.Report, words []string, baseline *record.Report) (*GateResult, error) {
	g := &GateResult{Words: words, Cells: len(rep.Results), fresh: map[string]bool{}, cause: map[string]string{}}
	against := slices.DeleteFunc(slices.Clone(words), func(k string) bool { return !NeedsBaseline(k) })
	if len(against) > 0 && baseline == nil {
		return nil, fmt.Errorf("--fail-on %s needs --baseline RUN", strings.Join(against, ","))
	}
	byCell := map[string][]Trip{}
	add := func(cell, word, text string) {
		byCell[cell] = append(byCell[cell], Trip{Cell: cell, Word: word, Text: text})
	}
	for _, r := range rep.Results {
		id := r.Cell.ID
		if slices.Contains(words, string(r.Verdict)) && slices.Contains(GateVerdicts, r.Verdict) {
			add(id, string(r.Verdict), string(r.Verdict))
		}
		st, k := Status(rep, r)
		if slices.Contains(words, GateUnexpected) && failed(r.Verdict) && st != XFail {
			add(id, GateUnexpected, unexpectedText(r, st, k))
		}
		if slices.Contains(words, GateXPass) && st == XPass {
			text := "xpass (a known issue now passes"
			if k.Issue != "" {
				text += ": " + k.Issue
			}
			add(id, GateXPass, text+")")
		}
		g.cause[id] = r.Signature
		if g.cause[id] == "" && failed(r.Verdict) {
			g.cause[id] = r.Reason
		}
	}
	var removed []string
	if baseline != nil {
		g.Baseline = baseline.Run.Name
		d := Compare(baseline, rep)
		for _, f := range d.Flips {
			if slices.Contains(words, f.Kind) {
				add(f.Cell, f.Kind, f.text())
				g.fresh[f.Cell] = true
				if f.Kind == Removed {
					removed = append(removed, f.Cell)
				}
			}
		}
		for _, p := range d.Perf {
			if slices.Contains(words, p.Kind) {
				add(p.Cell, p.Kind, p.text())
				g.fresh[p.Cell] = true
			}
		}
		before := map[string]classify.Verdict{}
		for _, r := range baseline.Results {
			before[r.Cell.ID] = r.Verdict
		}
		for _, r := range rep.Results {
			if v, ok := before[r.Cell.ID]; len(byCell[r.Cell.ID]) > 0 && (!ok || v != r.Verdict) {
				g.fresh[r.Cell.ID] = true
			}
		}
	}
	for _, r := range rep.Results {
		g.Trips = append(g.Trips, byCell[r.Cell.ID]...)
	}
	for _, id := range removed {
		g.Trips = append(g.Trips, byCell[id]...)
	}
	return g, nil
}

// covered reports whether a [[known]] entry of the run matches the cell.
func covered(rep *record.Report, r record.Result) bool {
	return slices.ContainsFunc(rep.Run.Known, func(k matrix.Known) bool { return k.Matches(r.Cell) })
}

// unexpectedText is an unexpected failure's line in a gate: "unexpected
// garbage", and for a known issue's cell that fails otherwise than its
// entry expects, what the entry expects.
func unexpectedText(r record.Result, st string, k *matrix.Known) string {
	s := "unexpected " + string(r.Verdict)
	if st == KnownChanged && k != nil {
		s += fmt.Sprintf(" (changed: a [[known]] entry expects %s", k.Verdict)
		if k.Issue != "" {
			s += ", " + k.Issue
		}
		s += ")"
	}
	return s
}

// text is the flip's line in a gate: "regression (correct before, crash
// now)".
func (f Flip) text() string {
	now := orDash(string(f.New))
	if f.Alone != "" {
		now = fmt.Sprintf("%s alone, %s against the base's yardstick", f.Alone, f.New)
	}
	return fmt.Sprintf("%s (%s before, %s now)", f.Kind, orDash(string(f.Base)), now)
}

// text is the change's line in a gate.
func (p PerfChange) text() string {
	return fmt.Sprintf("%s (%s at concurrency %d: %s before, %s now, %+.0f%%)",
		p.Kind, p.Metric, p.Concurrency, rankText(p.Base), rankText(p.New), p.Change*100)
}

// GateListMax is how many cells a failed gate's summary lists by default:
// enough to act on, few enough that 10,000 failing cells print a few
// dozen lines; the rest are counted and where they are is said.
const GateListMax = 20

// SummaryOptions shape a failed gate's message.
type SummaryOptions struct {
	// Width bounds each line in runes; 0 leaves lines whole (a CI log
	// is not a terminal: nothing there cuts a line).
	Width int
	// Max bounds the cells listed; 0 lists every one.
	Max int
	// Rest says where the cells left out are listed ("runs/x/report.md").
	Rest string
}

// Summary is a failed gate's message: what tripped and how many cells,
// what is new since the baseline, the count of cells by word, then a line
// per cell (those new since the baseline first, marked *) with why and the
// cell's cause, at most o.Max of them and then how many more and where.
func (g *GateResult) Summary(o SummaryOptions) []string {
	var cells []string
	byCell := map[string][]Trip{}
	for _, t := range g.Trips {
		if _, ok := byCell[t.Cell]; !ok {
			cells = append(cells, t.Cell)
		}
		byCell[t.Cell] = append(byCell[t.Cell], t)
	}
	out := []string{fmt.Sprintf("--fail-on %s: %d of %d cells failed the gate", strings.Join(g.Words, ","), len(cells), g.Cells)}
	if g.Baseline != "" {
		fresh := 0
		for _, c := range cells {
			if g.fresh[c] {
				fresh++
			}
		}
		switch {
		case fresh == 0:
			out = append(out, fmt.Sprintf("  nothing new since the baseline %s: every cell had the same verdict there", g.Baseline))
		case fresh == len(cells):
			out = append(out, fmt.Sprintf("  new since the baseline %s: all of them", g.Baseline))
		default:
			out = append(out, fmt.Sprintf("  new since the baseline %s: %d, marked * and listed first; %d had the same verdict there", g.Baseline, fresh, len(cells)-fresh))
		}
	}
	var counts []string
	for _, w := range g.Words {
		n := 0
		for _, c := range cells {
			if slices.ContainsFunc(byCell[c], func(t Trip) bool { return t.Word == w }) {
				n++
			}
		}
		if n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, w))
		}
	}
	out = append(out, "  cells by kind: "+strings.Join(counts, ", "))
	slices.SortStableFunc(cells, func(a, b string) int {
		switch {
		case g.fresh[a] == g.fresh[b]:
			return 0
		case g.fresh[a]:
			return -1
		}
		return 1
	})
	listed := cells
	if o.Max > 0 && len(cells) > o.Max {
		listed = cells[:o.Max]
	}
	for _, c := range listed {
		mark := "  "
		if g.fresh[c] {
			mark = "* "
		}
		out = append(out, mark+record.Clean(c)+": "+g.why(byCell[c]))
	}
	if o.Width > 0 {
		for i, l := range out {
			out[i] = clip(l, o.Width)
		}
	}
	if n := len(cells) - len(listed); n > 0 {
		// Never cut: a path cut short is no use.
		l := fmt.Sprintf("  … and %d more %s", n, map[bool]string{true: "cell", false: "cells"}[n == 1])
		if o.Rest != "" {
			l += ": see " + record.Clean(o.Rest)
		}
		out = append(out, l)
	}
	return out
}

// why joins a cell's trips, a plain verdict left out where "unexpected
// <verdict>" says it already, then the cell's cause.
func (g *GateResult) why(trips []Trip) string {
	var texts []string
	for _, t := range trips {
		if slices.ContainsFunc(trips, func(u Trip) bool {
			return u.Word == GateUnexpected && t.Word != GateUnexpected && (u.Text == "unexpected "+t.Text || strings.HasPrefix(u.Text, "unexpected "+t.Text+" ("))
		}) {
			continue
		}
		texts = append(texts, t.Text)
	}
	s := strings.Join(texts, "; ")
	if c := record.Clean(strings.SplitN(g.cause[trips[0].Cell], "\n", 2)[0]); c != "" {
		s += "; cause: " + c
	}
	return s
}

// NewsLine leads a job summary: the unexpected failures and the known
// issues that now pass, or that there is nothing new.
func NewsLine(rep *record.Report) string { return NewsLineWith(rep, nil) }

// NewsLineWith is NewsLine of a run swept against a baseline run (nil:
// none): "new" then means what the gate's summary means by it, an
// unexpected failure whose verdict the baseline did not have for the cell;
// the others are counted apart.
func NewsLineWith(rep, baseline *record.Report) string {
	var before map[string]classify.Verdict
	if baseline != nil {
		before = map[string]classify.Verdict{}
		for _, r := range baseline.Results {
			before[r.Cell.ID] = r.Verdict
		}
	}
	var unexpected, xpass []string
	same := 0
	for _, r := range rep.Results {
		st, _ := Status(rep, r)
		if v, ok := before[r.Cell.ID]; ok && v == r.Verdict && (st == Unexpected || st == KnownChanged) {
			same++
			continue
		}
		switch st {
		case Unexpected:
			unexpected = append(unexpected, fmt.Sprintf("%s (%s)", r.Cell.ID, r.Verdict))
		case KnownChanged:
			_, k := Status(rep, r)
			unexpected = append(unexpected, fmt.Sprintf("%s (%s, known %s)", r.Cell.ID, r.Verdict, k.Verdict))
		case XPass:
			xpass = append(xpass, r.Cell.ID)
		}
	}
	since := ""
	if baseline != nil {
		since = " since the baseline " + baseline.Run.Name
	}
	if len(unexpected) == 0 && len(xpass) == 0 {
		switch {
		case same > 0:
			return fmt.Sprintf("Nothing new%s: its %d unexpected failure(s) had the same verdicts there.", since, same)
		case len(rep.Run.Known) == 0:
			return ""
		}
		return "Nothing new: every failure is a known issue, and every known issue still fails."
	}
	var parts []string
	if len(unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("%d unexpected failure(s)%s: %s", len(unexpected), since, strings.Join(unexpected, "; ")))
	}
	switch {
	case same > 0 && len(unexpected) > 0:
		parts = append(parts, fmt.Sprintf("%d more unexpected failure(s) had the same verdicts there", same))
	case same > 0:
		parts = append(parts, fmt.Sprintf("no unexpected failure%s: its %d had the same verdicts there", since, same))
	}
	if len(xpass) > 0 {
		parts = append(parts, fmt.Sprintf("%d known issue(s) now pass (XPASS): %s", len(xpass), strings.Join(xpass, "; ")))
	}
	return "New: " + strings.Join(parts, ". ") + "."
}
