package reports

import "github.com/bmx-dev/bmx/internal/record"

// PerfChangesOf compares two results of one cell (measured in two runs, or
// at two versions by a bisect) by the perf gate's rule: the same changes,
// judged the same way, as a diff of two runs holding them would find.
func PerfChangesOf(base, new record.Result) []PerfChange {
	new.Cell.ID = base.Cell.ID
	return perfChanges(&record.Report{Results: []record.Result{base}}, &record.Report{Results: []record.Result{new}})
}
