package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestShapeOnlyMarked: a correct cell whose probe had no expectation and no
// reference is correct* in every format, with the legend saying why.
func TestShapeOnlyMarked(t *testing.T) {
	rep := fixture()
	var cell *record.Result
	for i := range rep.Results {
		if rep.Results[i].Verdict == classify.Correct {
			cell = &rep.Results[i]
		}
	}
	if cell == nil {
		t.Fatal("the fixture has no correct cell")
	}
	cell.Observations = []evidence.Observation{{Probe: "story", Kind: evidence.Chat, Prompt: "Once upon a time",
		Text: "Once upon a time, there was a little girl named Lily. She liked the sun.", FinishReason: "stop", HTTPStatus: 200}}
	cell.Exit, cell.TimedOut, cell.LogTail, cell.Fatal = nil, false, "", ""
	cell.Judge(nil)
	if cell.Verdict != classify.Correct || !cell.ShapeOnly || !strings.Contains(cell.Reason, "judged by shape only") {
		t.Fatalf("got %s shape-only=%v: %s", cell.Verdict, cell.ShapeOnly, cell.Reason)
	}
	var table, md, html bytes.Buffer
	if err := Table(&table, rep); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "md": strings.ReplaceAll(md.String(), `\*`, "*"), "html": html.String()} {
		if !strings.Contains(out, "correct*") || !strings.Contains(out, "judged by shape only") {
			t.Errorf("%s lacks correct* or its legend:\n%s", name, out)
		}
	}
	if !strings.Contains(html.String(), `class="v v-correct">correct*`) {
		t.Error("html: correct* must be styled as correct")
	}
	// With an expectation met, the same cell is plainly correct.
	cell.Observations[0].Expect = &evidence.Expect{Contains: "Lily"}
	cell.Judge(nil)
	if cell.ShapeOnly || cell.Shown() != "correct" {
		t.Errorf("expectation met: shown %s", cell.Shown())
	}
}
