package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/classify"
)

// Prediction is why --prune did not start a cell: one of its axis values
// failed with the same cause in Cells, which differ from each other in every
// other axis. Verdict is what the cell would most likely have ended as; it is
// evidence, never the cell's verdict (that is classify.Predicted), and never
// correct.
type Prediction struct {
	Axis      string           `json:"axis"`
	Value     string           `json:"value"`
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	Cells     []string         `json:"cells"`
}

// Text says what was predicted and on what evidence.
func (p *Prediction) Text() string {
	cause := string(p.Verdict)
	if p.Signature != "" {
		cause += " (" + p.Signature + ")"
	}
	return fmt.Sprintf("not started (--prune): %s=%s ended as %s in %d cells that differ in every other axis: %s; bmx sweep --resume RUN --confirm runs it",
		p.Axis, p.Value, cause, len(p.Cells), strings.Join(p.Cells, "; "))
}

// predictedShown is how a grid shows a predicted cell: the predicted verdict
// in parentheses, "(crash)", readable without colour.
func predictedShown(r Result) string {
	if r.Prediction != nil {
		return "(" + string(r.Prediction.Verdict) + ")"
	}
	return "(" + string(classify.Predicted) + ")"
}

// isPredictedShown reports a grid text made by predictedShown.
func isPredictedShown(s string) bool {
	return strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")")
}

// Predicted counts the cells --prune did not start.
func (rep *Report) Predicted() int {
	n := 0
	for _, r := range rep.Results {
		if r.Verdict == classify.Predicted {
			n++
		}
	}
	return n
}

// PredictedLegend explains "(crash)" under a grid that shows it, or is "".
func (rep *Report) PredictedLegend() string {
	if !slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Verdict == classify.Predicted }) {
		return ""
	}
	return "(crash) = predicted, not started (--prune): a value of the cell failed alike in other cells; no regression gate counts it; bmx sweep --resume RUN --confirm runs these cells"
}
