package across

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// Greedy answers to the river probe, neither expected.
const (
	riverA = "The river runs slowly past the old mill and into the sea. Its water is cold even in summer."
	riverB = "Mountains rise above the valley where the farmers keep their sheep. Snow stays on them until June."
)

// riverRun is a run of the probe file probes over a=x,y on day day: the
// reference a=x answers refText ("": it crashed at start), a=y yText; as a
// sweep records and reports it.
func riverRun(day int, probes, refText, yText string) *record.Report {
	result := func(id, text string, ref *classify.Reference) record.Result {
		r := record.Result{Cell: matrix.Cell{ID: "a=" + id, Values: []matrix.AxisValue{{Axis: "a", Value: id}}}}
		if text == "" {
			r.Exit = &evidence.Exit{Code: 1}
			r.LogTail = "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
		} else {
			n := 20
			r.Observations = []evidence.Observation{{Probe: "river", Kind: evidence.Chat, Prompt: "Write two sentences about the river.",
				MaxTokens: 64, Text: text, FinishReason: "stop", HTTPStatus: 200, Tokens: &n}}
		}
		r.Judge(ref)
		return r
	}
	run := &record.Run{Name: "river", ProbeSet: probes, Reference: "a=x", Vars: map[string]string{"model": "m"},
		Started: time.Date(2026, 3, day, 0, 0, 0, 0, time.UTC), Axes: []record.AxisValues{{Name: "a", Values: []string{"x", "y"}}}}
	ref := result("x", refText, nil)
	return record.NewReport(run, []record.Result{ref, result("y", yText, ref.AsReference())})
}

// TestHistoryAcrossYardstick: runs 2 and 3 lost their reference; run 2 is
// judged against run 1's yardstick, and run 3 against the same one, lent
// on by run 2: a=y stays wrong throughout. Run 4 changed its probe file,
// so no yardstick can judge it: a=y's correct there is drawn as ◇ (no
// fix) in the strip, the change, the note, the HTML history and the
// published grid and evidence page, never as green.
func TestHistoryAcrossYardstick(t *testing.T) {
	reps := []*record.Report{
		riverRun(1, "/ci/probes.toml", riverA, riverB),
		riverRun(2, "/ci/probes.toml", "", riverB),
		riverRun(3, "/ci/probes.toml", "", riverB),
		riverRun(4, "/ci/probes-v2.toml", "", riverB),
	}
	dirs := []string{"runs/1", "runs/2", "runs/3", "runs/4"}
	h := NewHistory(dirs, reps)
	lent := "baseline 20260301T000000Z-river:a=x"
	if h.Runs[0].Yardstick != "" || h.Runs[1].Yardstick != lent || h.Runs[2].Yardstick != lent || h.Runs[3].Yardstick != "" {
		t.Errorf("yardsticks lent: %q %q %q %q, want runs 2 and 3 judged against %s", h.Runs[0].Yardstick, h.Runs[1].Yardstick, h.Runs[2].Yardstick, h.Runs[3].Yardstick, lent)
	}
	var y CellHistory
	for _, c := range h.Cells {
		if c.Cell == "a=y" {
			y = c
		}
	}
	if y.Strip != "✗✗✗◇" || y.Latest != classify.Correct || !y.Points[3].YardstickLost || y.LastChange == nil || !y.LastChange.YardstickLost {
		t.Fatalf("a=y: %+v, want ✗✗✗◇ with the last change's yardstick lost", y)
	}
	if !strings.Contains(y.note(), "yardstick lost, not a fix") || !strings.Contains(h.changeText(y), "yardstick lost") {
		t.Errorf("a=y's note %q, change %q", y.note(), h.changeText(y))
	}
	var page bytes.Buffer
	if err := RenderHistory(&page, h, "html"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<span class="v v-yardstick-lost">correct (yardstick lost: no fix)</span>`) {
		t.Errorf("the history page does not draw a=y's latest as a lost yardstick:\n%s", page.String())
	}

	out := t.TempDir()
	if _, err := Publish(out, dirs, reps); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), `class="v v-yardstick-lost"`) || !strings.Contains(string(index), "◇ correct (yardstick lost)") || strings.Contains(string(index), `class="v v-correct"`) {
		t.Errorf("the published grid draws a=y's correct as a fix:\n%s", index)
	}
	pages, _ := filepath.Glob(filepath.Join(out, "cells", "*", "a-y-*.html"))
	if len(pages) != 1 {
		t.Fatalf("a=y's evidence pages: %v", pages)
	}
	ev, _ := os.ReadFile(pages[0])
	if !strings.Contains(string(ev), "yardstick lost:") || !strings.Contains(string(ev), `v-`+reports.YardstickLost) {
		t.Errorf("a=y's evidence page does not say its yardstick was lost:\n%s", ev)
	}
}
