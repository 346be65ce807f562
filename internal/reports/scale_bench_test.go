package reports

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/benchmem"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// The benchmarks below time what a user waits for at scale (issue 25):
// `bmx report --format F` on a run of 1,000 and 10,000 cells (reading the
// run directory and rendering it) and a merge of two halves (reading both,
// writing results.jsonl, report.md, report.html and report.json). Run them
// with
//
//	go test ./internal/reports -run '^$' -bench 'Report|Merge' -count 5
//
// The runs are built from real result lines of a simulated sweep
// (testdata/bench: `bmx sweep`'s 12 cells, 3 to 190 KB a line with their
// observations, logprobs and log tails): cell i of the 100 x 100 grid (10 x
// 100 for 1,000 cells) is a line of benchCycle with its own cell ID, argv
// and resolved backends, so no two cells resolve alike (the worst case for
// the "same effective config" search). Besides ns/op each reports
// peak-heap-MiB, the largest heap the run saw (sampled every 2 ms), and
// out-MB, what was written.
//
// Target: 10,000 cells in at most 15 s and 1 GiB each, on the 2-core
// development machine; 10x the cells at most about 12x the time.

// benchLines are the sim sweep's result lines and its run.json.
func benchLines(b testing.TB) ([]record.Result, *record.Run) {
	b.Helper()
	f, err := os.Open(filepath.Join("testdata", "bench", "sim-results.jsonl.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	lines, _, err := record.ReadResults(zr)
	if err != nil || len(lines) == 0 {
		b.Fatalf("read sim lines: %d, %v", len(lines), err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "bench", "run.json"))
	if err != nil {
		b.Fatal(err)
	}
	var run record.Run
	if err := json.Unmarshal(data, &run); err != nil {
		b.Fatal(err)
	}
	return lines, &run
}

// benchRun writes a run directory of rows x cols cells into dir (all of
// them, or the half half of 2 when half is 0 or 1) and returns it.
func benchRun(b testing.TB, dir string, rows, cols, half int) string {
	b.Helper()
	lines, run := benchLines(b)
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, record.ResultsFile))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(out)
	for i := range rows * cols {
		if half >= 0 && i%2 != half {
			continue
		}
		r := lines[benchCycle[i%len(benchCycle)]]
		row, col := run.Axes[0].Values[i/cols], run.Axes[1].Values[i%cols]
		r.Cell = matrix.Cell{ID: "row=" + row + ",col=" + col, Values: []matrix.AxisValue{{Axis: "row", Value: row}, {Axis: "col", Value: col}}}
		r.Argv = append(append([]string(nil), r.Argv...), "--row", row, "--col", col)
		if r.Resolved != nil {
			r.Resolved = map[string]string{"row_backend": row, "col_backend": col, "attention_backend": "flashinfer"}
		}
		line, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	if half >= 0 {
		run.Only = []string{fmt.Sprintf("half=%d", half)}
		run.Cells = rows * cols / 2
	}
	if err := record.WriteRun(dir, run); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchCycle is the order cells take the sim lines in: the 12 cells of the
// sweep and a second garbage cell (the largest lines, with their top-k
// logprobs), so a line averages 57 KB, as real sweeps' do.
var benchCycle = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8}

var benchSizes = []struct {
	name       string
	rows, cols int
}{{"1000", 10, 100}, {"10000", 100, 100}}

// BenchmarkReport is `bmx report --format F RUN`: read the run, render it.
func BenchmarkReport(b *testing.B) {
	for _, size := range benchSizes {
		dir := benchRun(b, filepath.Join(b.TempDir(), "run"), size.rows, size.cols, -1)
		for _, format := range []string{"table", "md", "html", "json", "csv", "junit"} {
			b.Run(size.name+"/"+format, func(b *testing.B) {
				var written int64
				peak := benchmem.HeapPeak(b, func() {
					rep, err := record.Load(dir)
					if err != nil {
						b.Fatal(err)
					}
					cw := &benchmem.CountWriter{}
					if err := Render(format, cw, rep); err != nil {
						b.Fatal(err)
					}
					written = cw.N
				})
				b.ReportMetric(float64(written)/1e6, "out-MB")
				b.ReportMetric(peak, "peak-heap-MiB")
			})
		}
	}
}

// BenchmarkMerge is `bmx merge` of two halves of a run: read both, write
// the merged run with its report files.
func BenchmarkMerge(b *testing.B) {
	for _, size := range benchSizes {
		tmp := b.TempDir()
		halves := []string{
			benchRun(b, filepath.Join(tmp, "half0"), size.rows, size.cols, 0),
			benchRun(b, filepath.Join(tmp, "half1"), size.rows, size.cols, 1),
		}
		b.Run(size.name, func(b *testing.B) {
			out := filepath.Join(tmp, "merged")
			peak := benchmem.HeapPeak(b, func() {
				m, err := Merge(halves)
				if err != nil {
					b.Fatal(err)
				}
				if err := WriteMerged(out, m, WriteFiles); err != nil {
					b.Fatal(err)
				}
				if got := len(m.Report.Results); got != size.rows*size.cols {
					b.Fatalf("merged %d cells, want %d", got, size.rows*size.cols)
				}
			})
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}
