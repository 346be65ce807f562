package reports

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

func gridResult(moe, fp4 string, v classify.Verdict, sig string) record.Result {
	return record.Result{Cell: matrix.Cell{ID: "moe=" + moe + ",fp4=" + fp4, Values: []matrix.AxisValue{{Axis: "moe", Value: moe}, {Axis: "fp4", Value: fp4}}},
		Verdict: v, Signature: sig}
}

func TestBlame(t *testing.T) {
	rep := &record.Report{Run: &record.Run{Axes: []record.AxisValues{{Name: "moe", Values: []string{"a", "b", "c"}}, {Name: "fp4", Values: []string{"x", "y", "z"}}}}}
	const sm100 = "RuntimeError: trtllm-gen kernels are SM100-only"
	for _, fp4 := range []string{"x", "y", "z"} {
		rep.Results = append(rep.Results, gridResult("c", fp4, classify.Crash, sm100)) // c is broken
	}
	rep.Results = append(rep.Results,
		gridResult("a", "x", classify.Correct, ""), gridResult("a", "y", classify.Correct, ""), gridResult("a", "z", classify.Correct, ""),
		gridResult("b", "x", classify.Correct, ""), gridResult("b", "y", classify.Garbage, ""), gridResult("b", "z", classify.Correct, ""),
	)
	bt := BlameOf(rep)
	var c, y *Blame
	for i := range bt.Values {
		switch b := &bt.Values[i]; b.Axis + "=" + b.Value {
		case "moe=c":
			c = b
		case "fp4=y":
			y = b
		}
	}
	if c == nil || !c.ToBlame || c.Failed != 3 || !strings.Contains(c.Text, "crash in 3 of 3 cells") || !strings.Contains(c.Text, "TO BLAME") {
		t.Errorf("moe=c: %+v", c)
	}
	if y == nil || y.ToBlame || !strings.Contains(y.Text, "failed in 2 of 3 cells") || !strings.Contains(y.Text, "2 causes") {
		t.Errorf("fp4=y: %+v", y)
	}
	if len(bt.Interactions) != 1 || bt.Interactions[0].A.Value != "b" || bt.Interactions[0].B.Value != "y" {
		t.Fatalf("interactions: %+v", bt.Interactions)
	}
	if !strings.Contains(bt.Interactions[0].Text, "works with every other") {
		t.Errorf("interaction text: %s", bt.Interactions[0].Text)
	}
	lines := bt.Lines()
	if len(lines) < 3 || !strings.Contains(lines[0], "TO BLAME") {
		t.Errorf("values to blame come first: %q", lines)
	}
	// A value whose every cell fails while the axis's other values fail too
	// is not singled out.
	rep.Results = []record.Result{gridResult("a", "x", classify.Crash, sm100), gridResult("a", "y", classify.Crash, sm100),
		gridResult("b", "x", classify.Crash, sm100), gridResult("b", "y", classify.Crash, sm100)}
	for _, b := range BlameOf(rep).Values {
		if b.ToBlame {
			t.Errorf("everything fails, yet %s=%s is blamed", b.Axis, b.Value)
		}
	}
}

// TestBlameIncludeOnlyValue: a value only [[include]] blocks sweep (the
// config's axis lists another) is blamed like any other.
func TestBlameIncludeOnlyValue(t *testing.T) {
	rep := &record.Report{Run: &record.Run{Axes: []record.AxisValues{{Name: "moe", Values: []string{"a", "b"}}, {Name: "fp4", Values: []string{"x"}}}}}
	rep.Results = []record.Result{
		gridResult("a", "x", classify.Correct, ""), gridResult("b", "x", classify.Correct, ""),
		gridResult("a", "off", classify.Garbage, ""), gridResult("b", "off", classify.Garbage, ""),
	}
	for _, b := range BlameOf(rep).Values {
		if b.Axis == "fp4" && b.Value == "off" {
			if !b.ToBlame || b.Failed != 2 {
				t.Errorf("fp4=off: %+v", b)
			}
			return
		}
	}
	t.Errorf("fp4=off, a value only includes swept, is not in the blame table: %+v", BlameOf(rep).Values)
}
