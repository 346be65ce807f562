package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// CSV renders one row per cell: one column per axis, then the verdict,
// known-issue status, signature, reason and times.
func CSV(w io.Writer, rep *record.Report) error {
	cw := csv.NewWriter(w)
	var header []string
	for _, a := range rep.Run.Axes {
		header = append(header, a.Name)
	}
	header = append(header, "cell", "verdict", "known", "signature", "reason", "ready_ms", "total_ms", "started", "repro")
	// Performance columns per concurrency measured, filled for correct
	// and degraded cells: c4_ttft_ms is the median time to first token at
	// concurrency 4, and so on.
	var levels []int
	if perf := PerformanceOf(rep); perf != nil {
		levels = perf.Levels
	}
	for _, c := range levels {
		for _, f := range perfColumns {
			header = append(header, fmt.Sprintf("c%d_%s", c, f))
		}
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rep.Results {
		var row []string
		for _, a := range rep.Run.Axes {
			v, _ := r.Cell.Value(a.Name)
			row = append(row, csvSafe(v))
		}
		st, _ := Status(rep, r)
		row = append(row, csvSafe(r.Cell.ID), string(r.Verdict), st, csvSafe(r.Signature), csvSafe(r.Reason),
			fmt.Sprint(r.Timings.ReadyMS), fmt.Sprint(r.Timings.TotalMS), r.Started.UTC().Format("2006-01-02T15:04:05Z"), csvSafe(r.Repro))
		for _, c := range levels {
			row = append(row, perfFields(r, c)...)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// perfColumns are the performance figures in CSV, per concurrency.
// tok_s_req_incl_ttft is output tokens over end-to-end time, time to first
// token included; decode_tok_s_req leaves it out (1000 / tpot_ms).
var perfColumns = []string{"requests", "ttft_ms", "ttft_p90_ms", "tpot_ms", "decode_tok_s_req", "tok_s_req_incl_ttft", "tok_s_req_incl_ttft_min", "tok_s_req_incl_ttft_max", "tok_s_total"}

// perfFields are a result's perfColumns at a concurrency, empty for a cell
// that was not measured there.
func perfFields(r record.Result, concurrency int) []string {
	out := make([]string, len(perfColumns))
	var l *evidence.PerfLevel
	if measured(r) {
		l = r.Perf.Level(concurrency)
	}
	if l == nil {
		return out
	}
	out[0] = fmt.Sprint(l.Requests)
	if l.Requests == 0 {
		return out
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	tpot, decode := "", ""
	if l.TPOTMS.Median > 0 {
		tpot, decode = f(l.TPOTMS.Median), f(l.DecodeTokensPerSecond.Median)
	}
	copy(out[1:], []string{f(l.TTFTMS.Median), f(l.TTFTMS.P90), tpot, decode, f(l.TokensPerSecond.Median),
		f(l.TokensPerSecond.Min), f(l.TokensPerSecond.Max), f(l.TotalTokensPerSecond)})
	return out
}

// csvSafe cleans server text and defuses spreadsheet formulas: a cell that
// starts with =, +, - or @ is prefixed with an apostrophe.
func csvSafe(s string) string {
	s = record.Clean(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		s = "'" + s
	}
	return s
}
