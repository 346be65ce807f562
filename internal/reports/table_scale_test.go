package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// scaleReport is the 10,000-cell run of BenchmarkReport (100 x 100 cells
// cycling through the sim sweep's result lines), built in memory.
func scaleReport(t testing.TB, rows, cols int) *record.Report {
	t.Helper()
	lines, run := benchLines(t)
	run.Axes = []record.AxisValues{{Name: "row"}, {Name: "col"}}
	for i := range rows {
		run.Axes[0].Values = append(run.Axes[0].Values, fmt.Sprintf("r%03d", i))
	}
	for j := range cols {
		run.Axes[1].Values = append(run.Axes[1].Values, fmt.Sprintf("c%03d", j))
	}
	run.Cells = rows * cols
	run.Reference = "row=r000,col=c000"
	run.Known = []matrix.Known{{Match: map[string]string{"row": "r001"}, Verdict: "crash", Note: "a known issue"}}
	rep := &record.Report{Run: run}
	for i := range rows * cols {
		r := lines[benchCycle[i%len(benchCycle)]]
		row, col := run.Axes[0].Values[i/cols], run.Axes[1].Values[i%cols]
		r.Cell = matrix.Cell{ID: "row=" + row + ",col=" + col, Values: []matrix.AxisValue{{Axis: "row", Value: row}, {Axis: "col", Value: col}}}
		rep.Results = append(rep.Results, r)
	}
	return rep
}

// TestTableScale: the terminal report of 10,000 cells stays a few
// screens long at any width: no line wider than the width but the
// per-axis summary's, the grid replaced by it, the 769 "is faster but
// degraded" notes one line, and the per-cell and performance tables
// bounded with where the rest are.
func TestTableScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 cells")
	}
	rep := scaleReport(t, 100, 100)
	for _, width := range []int{80, DefaultWidth, 200} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			var out bytes.Buffer
			if err := TableWith(&out, rep, TableOptions{Width: width}); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) > 250 {
				t.Errorf("%d lines for 10,000 cells, want at most 250", len(lines))
			}
			for _, l := range lines {
				// Blame lines are clipped at 160 and the note names
				// three cells: prose may be longer, tables may not (but
				// the performance table, whose verdict and tok/s are
				// never cut, which stops fitting below about 90).
				if strings.HasPrefix(l, "performance: ") {
					break
				}
				if strings.HasPrefix(l, "+") || strings.HasPrefix(l, "|") {
					if n := twwidth.Width(l); n > width {
						t.Errorf("table line of %d columns, more than %d: %.80s", n, width, l)
						break
					}
				}
			}
			if strings.Contains(text, "| c099 ") || strings.Contains(text, "it wraps") {
				t.Errorf("the 100-column grid is printed; want the per-axis summary")
			}
			if !strings.Contains(text, "per axis value, the cells by verdict instead") {
				t.Errorf("no per-axis summary")
			}
			if n := strings.Count(text, "is faster, "); n != 0 {
				t.Errorf("%d \"is faster\" notes one by one, want them collapsed", n)
			}
			if n := strings.Count(text, "cells are faster, "); n != 1 {
				t.Errorf("%d collapsed \"faster but degraded\" notes, want 1:\n%s", n, text)
			}
			for _, want := range []string{"of 10000 cells shown", "9965 more; every cell: report.md", "(the 20 fastest of ", " more; every cell: report.md in the run directory, or bmx report --format md)", "more values of row in report.md"} {
				if !strings.Contains(text, want) {
					t.Errorf("missing %q", want)
				}
			}
			if t.Failed() {
				t.Logf("report:\n%s", text)
			}
		})
	}
}

// TestCutValues: a cell name too wide loses the ends of its longest values,
// not its last value, which often tells two rows apart.
func TestCutValues(t *testing.T) {
	for _, tc := range []struct {
		text  string
		width int
		want  string
	}{
		{"cutlass,trtllm", 20, "cutlass,trtllm"},
		{"flashinfer_cutlass,cudnn", 16, "flashinfe…,cudnn"},
		{"moe=flashinfer_cutlass,fp4=flashinfer_cudnn", 24, "moe=flashi…,fp4=flashin…"},
		{"moe=flashinfer_cutlass,fp4=flashinfer_cudnn", 12, "moe=…,fp4=f…"},
		{"flashinfer_cutlass", 8, "flashin…"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			got := cutValues(tc.text, tc.width)
			if got != tc.want {
				t.Errorf("cutValues(%q, %d) = %q, want %q", tc.text, tc.width, got, tc.want)
			}
			if n := twwidth.Width(got); n > tc.width {
				t.Errorf("%q is %d wide, more than %d", got, n, tc.width)
			}
		})
	}
}

// TestChartLabelKeepsLastValue: two cells whose names differ only in
// their last value keep different bar labels past chartLabelMax.
func TestChartLabelKeepsLastValue(t *testing.T) {
	long := "moe_runner_backend=flashinfer_cutlass,attention_backend=flashinfer,fp4_gemm_backend="
	a, b := chartLabel(PerfRow{Cell: long + "cudnn", Verdict: classify.Correct}), chartLabel(PerfRow{Cell: long + "trtllm", Verdict: classify.Correct})
	if a == b {
		t.Errorf("both bars read %q", a)
	}
	for _, l := range []string{a, b} {
		if n := len([]rune(l)); n > chartLabelMax {
			t.Errorf("%q is %d characters, more than %d", l, n, chartLabelMax)
		}
	}
}
