package reports

import (
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/classify"
)

// TestGate: a nightly gates on what is new. The fixture has one XPASS, two
// known failures and two unexpected ones.
func TestGate(t *testing.T) {
	rep := fixture()
	got, err := Gate(rep, []string{GateUnexpected}, nil)
	if err != nil || len(got) != 2 || !strings.Contains(strings.Join(got, ";"), "moe=cutlass,fp4=trtllm: unexpected crash") {
		t.Errorf("unexpected: %q %v", got, err)
	}
	if got, _ := Gate(rep, []string{GateXPass}, nil); len(got) != 1 || !strings.HasPrefix(got[0], "moe=cutlass,fp4=cudnn: xpass") {
		t.Errorf("xpass: %q", got)
	}
	if got, _ := Gate(rep, []string{"nan", "crash"}, nil); len(got) != 2 {
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
	got, err = Gate(rep, []string{GateRegression}, base)
	if err != nil || len(got) != 4 {
		t.Errorf("regression: %q %v", got, err)
	}
	if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "regression (correct before, nan now)") }) {
		t.Errorf("regression lines: %q", got)
	}
	if news := NewsLine(rep); !strings.HasPrefix(news, "New: 2 unexpected failure(s)") || !strings.Contains(news, "XPASS") {
		t.Errorf("news line %q", news)
	}
}
