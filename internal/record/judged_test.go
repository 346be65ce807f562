package record

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// TestJudged: a report of cells judged by this bmx's classifier is current;
// a cell an older bmx judged (no classifier recorded) makes it stale, with
// the change Rejudge would make, which Judged itself does not make.
func TestJudged(t *testing.T) {
	cell := func(id, answer string, v classify.Verdict) Result {
		return Result{
			Cell: matrix.Cell{ID: "a=" + id, Values: []matrix.AxisValue{{Axis: "a", Value: id}}}, Verdict: v,
			Observations: []evidence.Observation{{Probe: "math", Kind: evidence.Chat, Prompt: "What is 300+23?", Expect: evidence.Number(323),
				MaxTokens: 64, Text: answer, FinishReason: "stop", HTTPStatus: 200}},
		}
	}
	now := cell("x", "323", "")
	now.Judge(nil)
	old := cell("y", "The answer is 323.", classify.Wrong) // as an older classifier judged it
	rep := &Report{Run: &Run{Axes: []AxisValues{{Name: "a", Values: []string{"x", "y"}}}}, Results: []Result{now}}
	if j := rep.Judged(); !j.Current() || j.Classifier != classify.Fingerprint() || len(j.Changes) != 0 {
		t.Errorf("judged now: %+v", j)
	}
	rep.Results = append(rep.Results, old)
	want := Judged{Classifier: classify.Fingerprint(), Others: []string{""}, Stale: 1,
		Changes: []Change{{Cell: "a=y", From: "wrong", To: "correct"}}}
	if d := cmp.Diff(want, rep.Judged()); d != "" {
		t.Errorf("judged with an older cell (-want +got):\n%s", d)
	}
	if rep.Results[1].Verdict != classify.Wrong {
		t.Error("Judged changed the report")
	}
	rep.Rejudge()
	if j := rep.Judged(); !j.Current() || rep.Results[1].Verdict != classify.Correct {
		t.Errorf("after Rejudge: %+v, %s", j, rep.Results[1].Verdict)
	}
}
