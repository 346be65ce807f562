package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
)

// CSV renders one row per cell: one column per axis, then the verdict,
// known-issue status, signature, reason and times.
func CSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	var header []string
	for _, a := range rep.Run.Axes {
		header = append(header, a.Name)
	}
	header = append(header, "cell", "verdict", "known", "signature", "reason", "ready_ms", "total_ms", "started", "repro")
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rep.Results {
		var row []string
		for _, a := range rep.Run.Axes {
			v, _ := r.Cell.Value(a.Name)
			row = append(row, csvSafe(v))
		}
		st, _ := rep.Status(r)
		row = append(row, csvSafe(r.Cell.ID), string(r.Verdict), st, csvSafe(r.Signature), csvSafe(r.Reason),
			fmt.Sprint(r.Timings.ReadyMS), fmt.Sprint(r.Timings.TotalMS), r.Started.UTC().Format("2006-01-02T15:04:05Z"), csvSafe(r.Repro))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe cleans server text and defuses spreadsheet formulas: a cell that
// starts with =, +, - or @ is prefixed with an apostrophe.
func csvSafe(s string) string {
	s = Clean(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		s = "'" + s
	}
	return s
}
