package reports

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/classify"
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
	if got := lines(GateUnexpected); len(got) != 2 || !strings.Contains(strings.Join(got, ";"), "moe=cutlass,fp4=trtllm: unexpected crash") {
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
	if news := NewsLine(rep); !strings.HasPrefix(news, "New: 2 unexpected failure(s)") || !strings.Contains(news, "XPASS") {
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
		sum := g.Summary(width)
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
			"--fail-on unexpected,regression,xpass: 3 of 5 cells failed the gate",
			"  new since the baseline fixture: 1, marked * and listed first; 2 had the same verdict there",
			"  cells by kind: 2 unexpected, 1 regression, 1 xpass",
		}
		if !slices.Equal(sum[:3], want) {
			t.Errorf("head:\n%s\nwant:\n%s", strings.Join(sum[:3], "\n"), strings.Join(want, "\n"))
		}
		if len(sum) != 6 || !strings.HasPrefix(sum[3], "* moe=cutlass,fp4=trtllm: unexpected crash; regression (correct before, crash now); cause: CUDA err") {
			t.Errorf("the new cell is not first, or its line is wrong:\n%s", strings.Join(sum, "\n"))
		}
		if !strings.HasPrefix(sum[4], "  moe=cutlass,fp4=cudnn: xpass") || !strings.HasPrefix(sum[5], "  moe=cutlass,fp4=cutlass: unexpected nan; cause: probability") {
			t.Errorf("the other cells, in run order:\n%s", strings.Join(sum, "\n"))
		}
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
