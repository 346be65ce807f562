package reports

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/classify"
)

// TestGate: a nightly gates on what is new. The fixture has one XPASS, two
// known failures and two unexpected ones.
func TestGate(t *testing.T) {
	rep := fixture()
	lines := func(words ...string) []string {
		t.Helper()
		g, err := Gate(rep, words, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g.Lines()
	}
	// The known crash that answers garbage is news: unexpected, saying
	// what its entry expects.
	if got := lines(GateUnexpected); len(got) != 3 || !strings.Contains(strings.Join(got, ";"), "moe=cutlass,fp4=trtllm: unexpected crash") ||
		!slices.Contains(got, "moe=trtllm,fp4=cudnn: unexpected garbage (changed: a [[known]] entry expects crash, https://example.org/issues/1)") {
		t.Errorf("unexpected: %q", got)
	}
	if got := lines(GateXPass); len(got) != 1 || !strings.HasPrefix(got[0], "moe=cutlass,fp4=cudnn: xpass") {
		t.Errorf("xpass: %q", got)
	}
	if got := lines("nan", "crash"); len(got) != 2 {
		t.Errorf("a verdict still gates on every cell of it, known or not: %q", got)
	}
	if _, err := Gate(rep, []string{GateRegression}, nil); err == nil {
		t.Error("regression without a baseline must be an error")
	}
	// Against a baseline where every cell was correct, the failures of the
	// new run are regressions.
	base := fixture()
	for i := range base.Results {
		base.Results[i].Verdict = classify.Correct
	}
	g, err := Gate(rep, []string{GateRegression}, base)
	if err != nil || len(g.Trips) != 4 {
		t.Fatalf("regression: %+v %v", g, err)
	}
	if !slices.ContainsFunc(g.Lines(), func(s string) bool { return strings.Contains(s, "regression (correct before, nan now)") }) {
		t.Errorf("regression lines: %q", g.Lines())
	}
	if news := NewsLine(rep); !strings.HasPrefix(news, "New: 3 unexpected failure(s)") || !strings.Contains(news, "moe=trtllm,fp4=cudnn (garbage, known crash)") || !strings.Contains(news, "XPASS") {
		t.Errorf("news line %q", news)
	}
}

// TestGateUnexpectedWithoutKnown: with no [[known]] entry at all, every
// failure is unexpected, so --fail-on unexpected fails until each has one.
func TestGateUnexpectedWithoutKnown(t *testing.T) {
	rep := fixture()
	rep.Run.Known = nil
	g, err := Gate(rep, []string{GateUnexpected}, nil)
	if err != nil || len(g.Trips) != 4 {
		t.Errorf("4 failures, none known: %q %v", g.Lines(), err)
	}
}

// TestGateSummary: the message of a failed gate leads with the count of
// cells, what is new since the baseline and the count by word, then a line
// per cell, new ones first; every line fits the width.
func TestGateSummary(t *testing.T) {
	rep := fixture()
	// The baseline had the NaN cell failing alike and the crash cell
	// correct: the crash is new, the NaN is not.
	base := fixture()
	for i, r := range base.Results {
		if r.Cell.ID == "moe=cutlass,fp4=trtllm" {
			base.Results[i].Verdict = classify.Correct
		}
	}
	g, err := Gate(rep, []string{GateUnexpected, GateRegression, GateXPass}, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{100, 40} {
		sum := g.Summary(SummaryOptions{Width: width})
		for _, l := range sum {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: a line of %d runes: %q", width, n, l)
			}
		}
		if width != 100 {
			continue
		}
		t.Logf("\n%s", strings.Join(sum, "\n"))
		want := []string{
			"--fail-on unexpected,regression,xpass: 4 of 5 cells failed the gate",
			"  new since the baseline fixture: 1, marked * and listed first; 3 had the same verdict there",
			"  cells by kind: 3 unexpected, 1 regression, 1 xpass",
		}
		if !slices.Equal(sum[:3], want) {
			t.Errorf("head:\n%s\nwant:\n%s", strings.Join(sum[:3], "\n"), strings.Join(want, "\n"))
		}
		if len(sum) != 7 || !strings.HasPrefix(sum[3], "* moe=cutlass,fp4=trtllm: unexpected crash; regression (correct before, crash now); cause: CUDA err") {
			t.Errorf("the new cell is not first, or its line is wrong:\n%s", strings.Join(sum, "\n"))
		}
		if !strings.HasPrefix(sum[4], "  moe=cutlass,fp4=cudnn: xpass") || !strings.HasPrefix(sum[5], "  moe=cutlass,fp4=cutlass: unexpected nan; cause: probability") ||
			!strings.HasPrefix(sum[6], "  moe=trtllm,fp4=cudnn: unexpected garbage (changed: a [[known]] entry expects crash") {
			t.Errorf("the other cells, in run order:\n%s", strings.Join(sum, "\n"))
		}
	}
	// Off a terminal (width 0) no line is cut: a CI log keeps the cause whole.
	for _, l := range g.Summary(SummaryOptions{}) {
		if strings.Contains(l, "…") {
			t.Errorf("a line cut with no width: %q", l)
		}
	}
}

// TestGateSummaryBounded: 10,000 failing cells print a few dozen lines:
// the counts, the first Max cells, and how many more and where they are,
// that line whole even on a narrow terminal.
func TestGateSummaryBounded(t *testing.T) {
	rep := fixture()
	rep.Run.Known = nil
	one := rep.Results[2]
	rep.Results = nil
	for i := range 10000 {
		r := one
		r.Cell.ID = fmt.Sprintf("moe=m%05d,fp4=trtllm", i)
		rep.Results = append(rep.Results, r)
	}
	g, err := Gate(rep, []string{GateUnexpected, "crash"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := g.Summary(SummaryOptions{Width: 64, Max: GateListMax, Rest: "runs/nightly/report.md"})
	if len(sum) != 2+GateListMax+1 {
		t.Fatalf("%d lines:\n%s", len(sum), strings.Join(sum, "\n"))
	}
	if sum[0] != "--fail-on unexpected,crash: 10000 of 10000 cells failed the gate" || sum[1] != "  cells by kind: 10000 unexpected, 10000 crash" {
		t.Errorf("head:\n%s", strings.Join(sum[:2], "\n"))
	}
	if !strings.HasPrefix(sum[2], "  moe=m00000,fp4=trtllm: unexpected crash") {
		t.Errorf("first cell: %q", sum[2])
	}
	if last := sum[len(sum)-1]; last != "  … and 9980 more cells: see runs/nightly/report.md" {
		t.Errorf("last line %q", last)
	}
	if all := g.Summary(SummaryOptions{}); len(all) != 2+10000 {
		t.Errorf("Max 0 lists every cell: %d lines", len(all))
	}
}

// TestParseGates: one vocabulary, sweep's and diff's.
func TestParseGates(t *testing.T) {
	got, err := ParseGates([]string{"crash", " xpass", "regression", "crash", "degraded", "flaky", "skipped", "perf-improvement", "new"})
	if err != nil || !slices.Equal(got, []string{"crash", "xpass", "regression", "degraded", "flaky", "skipped", "perf-improvement", "new"}) {
		t.Errorf("%q %v", got, err)
	}
	for _, bad := range []string{"broken", "", "excluded", "predicted", "XPASS"} {
		if _, err := ParseGates([]string{bad}); err == nil || !strings.Contains(err.Error(), "not a verdict") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, w := range GateWords {
		if !strings.Contains(GateUsage("BASE"), w.Name+" (") {
			t.Errorf("--fail-on's help leaves out %s", w.Name)
		}
	}
}

// TestKnownTOMLNoSilencedRegression: against a baseline, report --format
// known proposes no entry over a cell that regressed (correct there,
// failing now), nor over a known issue's cell that fails otherwise than
// its entry expects; it lists both as comments.
func TestKnownTOMLNoSilencedRegression(t *testing.T) {
	rep, base := fixture(), fixture()
	base.Run.Name = "last-night"
	for i, r := range base.Results {
		if r.Cell.ID == "moe=cutlass,fp4=trtllm" {
			base.Results[i].Verdict = classify.Correct
		}
	}
	var with, without strings.Builder
	if err := KnownTOMLWith(&with, rep, base); err != nil {
		t.Fatal(err)
	}
	if err := KnownTOML(&without, rep); err != nil {
		t.Fatal(err)
	}
	entry := `fp4 = "trtllm"`
	if !strings.Contains(without.String(), entry) {
		t.Fatalf("without a baseline the unexpected crash gets an entry:\n%s", without.String())
	}
	got := with.String()
	if strings.Contains(got, entry) || strings.Contains(got, `moe = "trtllm"`) {
		t.Errorf("an entry that silences the regression or the changed known issue:\n%s", got)
	}
	for _, want := range []string{
		"# REGRESSION: moe=cutlass,fp4=trtllm was correct in the baseline last-night and is crash now",
		"# CHANGED: moe=trtllm,fp4=cudnn is garbage now where the entry matching moe=trtllm expects crash",
		`match = { moe = "cutlass", fp4 = "cutlass" }`, // the nan, unexpected in both runs, still gets one
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
}

// TestNewsLineWith: against a baseline, the news of report.md and
// report.html counts as new what the gate's summary does (an unexpected
// failure whose verdict the baseline did not have), the others apart.
func TestNewsLineWith(t *testing.T) {
	rep, base := fixture(), fixture()
	base.Run.Name = "last-night"
	for i, r := range base.Results {
		if r.Cell.ID == "moe=cutlass,fp4=trtllm" {
			base.Results[i].Verdict = classify.Correct
		}
	}
	g, err := Gate(rep, []string{GateUnexpected}, base)
	if err != nil {
		t.Fatal(err)
	}
	if sum := strings.Join(g.Summary(SummaryOptions{}), "\n"); !strings.Contains(sum, "new since the baseline last-night: 1, marked * and listed first; 2 had the same verdict there") {
		t.Fatalf("gate:\n%s", sum)
	}
	want := "New: 1 unexpected failure(s) since the baseline last-night: moe=cutlass,fp4=trtllm (crash). 2 more unexpected failure(s) had the same verdicts there. 1 known issue(s) now pass (XPASS): moe=cutlass,fp4=cudnn."
	if got := NewsLineWith(rep, base); got != want {
		t.Errorf("news\n got %s\nwant %s", got, want)
	}
	if got := NewsLineWith(rep, rep); got != "New: no unexpected failure since the baseline fixture: its 3 had the same verdicts there. 1 known issue(s) now pass (XPASS): moe=cutlass,fp4=cudnn." {
		t.Errorf("against itself: %s", got)
	}
	var md bytes.Buffer
	if err := MarkdownWith(&md, rep, base); err != nil || !strings.Contains(md.String(), "New: 1 unexpected failure(s) since the baseline last-night") {
		t.Errorf("report.md's news: %v\n%.400s", err, md.String())
	}
}
