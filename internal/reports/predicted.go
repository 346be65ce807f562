package reports

import (
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// isPredictedShown reports a grid text made by predictedShown.
func isPredictedShown(s string) bool {
	return strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")")
}

// PredictedLegend explains "(crash)" under a grid that shows it, or is "".
func PredictedLegend(rep *record.Report) string {
	if !slices.ContainsFunc(rep.Results, func(r record.Result) bool { return r.Verdict == classify.Predicted }) {
		return ""
	}
	return "(crash) = predicted, not started (--prune): a value of the cell failed alike in other cells; no regression gate counts it; bmx sweep --resume RUN --confirm runs these cells"
}
