package across

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// nights describes the runs writeNights makes: a config of rows x cols
// cells run every night for Nights nights, and a second, smaller config
// run every seventh night, on one host whose torch nightly changes every
// night. A few cells flip between nights (correct to degraded, garbage to
// NaN, crash to hang: each cell's line is its neighbour's on its flip
// nights), some correct cells slow down by a third from night SlowFrom on,
// and one night (Aborted) is interrupted after 60% of its cells.
type nights struct {
	Rows, Cols, Nights int
	// Aborted is the night that was interrupted (-1: none).
	Aborted  int
	SlowFrom int
}

// simLines are the result lines of a real simulated sweep (the 12 cells of
// `bmx sweep`, 3 to 170 KB each, with their observations, logprobs and log
// tails), judged with this bmx's classifier against the first (the
// reference), and the sweep's run.json. They live in reports' testdata.
func simLines(tb testing.TB) ([]record.Result, *record.Run) {
	tb.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "bench", "sim-results.jsonl.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	lines, _, err := record.ReadResults(zr)
	if err != nil || len(lines) == 0 {
		tb.Fatalf("read sim lines: %d, %v", len(lines), err)
	}
	ref := lines[0].AsReference()
	judge := classify.NewJudge()
	for i := range lines {
		if i == 0 {
			lines[i].JudgeBy(judge, nil)
		} else {
			lines[i].JudgeBy(judge, ref)
		}
	}
	data, err := os.ReadFile(filepath.Join("..", "testdata", "bench", "run.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var run record.Run
	if err := json.Unmarshal(data, &run); err != nil {
		tb.Fatal(err)
	}
	return lines, &run
}

// nightCycle is the order cells take the sim lines in: the 12 cells and a
// second garbage cell, so a line averages 57 KB as real sweeps' do.
var nightCycle = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8}

// Placeholders of a line template, replaced per cell.
const (
	phRow = "@@ROW@@"
	phCol = "@@COL@@"
)

// lineTemplates are the sim lines marshalled once with placeholders for
// the cell's row and column, so a cell's line is a replacement, not an
// encoding: 365 nights of 1,000 cells are 21 GB to write. slow holds the
// same lines with a third less speed.
func lineTemplates(tb testing.TB, lines []record.Result) (fast, slow [][]byte) {
	tb.Helper()
	for _, r := range lines {
		r.Cell = matrix.Cell{ID: "row=" + phRow + ",col=" + phCol, Values: []matrix.AxisValue{{Axis: "row", Value: phRow}, {Axis: "col", Value: phCol}}}
		r.Argv = append(append([]string(nil), r.Argv...), "--row", phRow, "--col", phCol)
		if r.Resolved != nil {
			r.Resolved = map[string]string{"row_backend": phRow, "col_backend": phCol, "attention_backend": "flashinfer"}
		}
		b, err := json.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		fast = append(fast, b)
		if r.Perf != nil {
			p := *r.Perf
			p.Levels = append([]evidence.PerfLevel(nil), p.Levels...)
			for i := range p.Levels {
				s := &p.Levels[i].TokensPerSecond
				s.Min, s.P10, s.Median, s.P90, s.Max = s.Min*0.66, s.P10*0.66, s.Median*0.66, s.P90*0.66, s.Max*0.66
			}
			r.Perf = &p
			if b, err = json.Marshal(r); err != nil {
				tb.Fatal(err)
			}
		}
		slow = append(slow, b)
	}
	return fast, slow
}

// writeNights writes the runs of n into root, one directory each as a
// sweep names them, and returns their paths in the order written.
func writeNights(tb testing.TB, root string, n nights) []string {
	tb.Helper()
	lines, base := simLines(tb)
	fast, slow := lineTemplates(tb, lines)
	var dirs []string
	start := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for night := range n.Nights {
		day := start.AddDate(0, 0, night)
		tonight := fast
		if night >= n.SlowFrom {
			tonight = slow
		}
		dirs = append(dirs, writeNight(tb, root, base, fast, tonight, "nightly", day, night, n.Rows, n.Cols, night == n.Aborted))
		if night%7 == 0 {
			dirs = append(dirs, writeNight(tb, root, base, fast, fast, "weekly", day.Add(time.Hour), night, 2, len(nightCycle), false))
		}
	}
	return dirs
}

// writeNight writes one run of rows x cols cells, every 37th of them
// from the lines slow.
func writeNight(tb testing.TB, root string, base *record.Run, fast, slow [][]byte, name string, day time.Time, night, rows, cols int, aborted bool) string {
	tb.Helper()
	run := *base
	run.Name, run.Started = name, day
	run.Host.Versions = map[string]string{"torch": day.Format("2.12.0.dev20060102"), "sglang": "0.5.9", "flashinfer-python": "0.6.5"}
	run.Host.Hostname, run.Host.GPU = "sm120-box", "NVIDIA RTX PRO 6000 Blackwell"
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
	run.Interrupted = aborted
	dir := filepath.Join(root, day.Format("20060102T150405Z")+"-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, record.ResultsFile))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	cells := rows * cols
	if aborted {
		cells = cells * 6 / 10
	}
	for i := range cells {
		k := i % len(nightCycle)
		if i > 0 && (i*7+night*13)%41 == 0 { // a flip: the neighbour's line tonight
			k = (k + 1) % len(nightCycle)
		}
		tmpl := fast[nightCycle[k]]
		if i%37 == 0 {
			tmpl = slow[nightCycle[k]]
		}
		row, col := run.Axes[0].Values[i/cols], run.Axes[1].Values[i%cols]
		line := bytes.ReplaceAll(bytes.ReplaceAll(tmpl, []byte(phRow), []byte(row)), []byte(phCol), []byte(col))
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := record.WriteRun(dir, &run); err != nil {
		tb.Fatal(err)
	}
	return dir
}
