package across

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// runOf is a run of two cells with the given verdicts, at version v.
func runOf(i int, a, b classify.Verdict) *record.Report {
	run := &record.Run{Name: "h", Started: time.Date(2026, 3, 1+i, 0, 0, 0, 0, time.UTC),
		Host: record.Host{Hostname: "gpu", Versions: map[string]string{"torch": fmt.Sprintf("2.12.0.dev%d", i)}}}
	cell := func(id string, v classify.Verdict) record.Result {
		return record.Result{Cell: matrix.Cell{ID: id}, Verdict: v, Classifier: classify.Fingerprint()}
	}
	return &record.Report{Run: run, Results: []record.Result{cell("a", a), cell("b", b)}}
}

// TestNewHistory follows two cells through runs given out of order: a
// flips once (not flaky; its change names the torch version that came
// with it), b goes back and forth (flaky).
func TestNewHistory(t *testing.T) {
	c, x, g := classify.Correct, classify.Crash, classify.Garbage
	verdicts := [][2]classify.Verdict{{c, c}, {c, g}, {c, c}, {x, g}, {x, c}}
	var dirs []string
	var reps []*record.Report
	for _, i := range []int{3, 0, 4, 1, 2} {
		dirs = append(dirs, fmt.Sprintf("runs/%d", i))
		reps = append(reps, runOf(i, verdicts[i][0], verdicts[i][1]))
	}
	h := NewHistory(dirs, reps)
	if len(h.Runs) != 5 || h.Runs[0].Dir != "runs/0" || h.Runs[4].Dir != "runs/4" {
		t.Fatalf("runs not in time order: %+v", h.Runs)
	}
	a, b := h.Cells[0], h.Cells[1]
	if a.Strip != "✓✓✓↯↯" || a.Flaky || a.Changes != 1 || a.LastChange == nil || a.LastChange.Run != 3 {
		t.Errorf("a: %+v", a)
	}
	if want := "torch 2.12.0.dev2 -> 2.12.0.dev3"; a.LastChange == nil || strings.Join(a.LastChange.Fingerprint, ",") != want {
		t.Errorf("a's change: %+v, want fingerprint %q", a.LastChange, want)
	}
	if b.Strip != "✓‽✓‽✓" || !b.Flaky || b.Changes != 4 || b.Latest != c {
		t.Errorf("b: %+v", b)
	}
	for _, f := range HistoryFormats {
		var buf bytes.Buffer
		want := "✓‽✓‽✓"
		if f == "html" {
			want = `<span class="flaky">flaky</span>`
		}
		if err := RenderHistory(&buf, h, f); err != nil || !strings.Contains(buf.String(), want) {
			t.Errorf("%s: %v\n%s", f, err, buf.String())
		}
	}
	if err := RenderHistory(&bytes.Buffer{}, h, "csv"); err == nil {
		t.Error("csv: no error")
	}
}

func TestCellAnchor(t *testing.T) {
	if got := CellAnchor("moe=a b,fp4=c"); got != "c-moe_a_b_fp4_c" {
		t.Errorf("CellAnchor = %q", got)
	}
}
