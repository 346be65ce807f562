package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestJSONCell checks what report.json keeps of a cell's raw evidence:
// short texts whole, long ones cut with their full size, no logprob steps
// (their health kept), the log's last lines; and the result itself as it
// was.
func TestJSONCell(t *testing.T) {
	long := strings.Repeat("é", jsonTextBytes) // twice jsonTextBytes bytes
	var log strings.Builder
	for i := range 100 {
		log.WriteString("line " + strings.Repeat("x", i%3) + "\n")
	}
	r := record.Result{
		Verdict: "garbage", Reason: "why",
		LogTail: log.String(),
		Observations: []evidence.Observation{
			{Probe: "short", Text: "OK", Reasoning: "thought", Logprobs: &evidence.Logprobs{Tokens: 1, Null: 1, Steps: []evidence.Step{{Token: "OK"}}}},
			{Probe: "long", Text: long, Reasoning: long, ReasoningBytes: 99999, Prompt: long},
		},
	}
	got := jsonCell(r)
	short, cut := got.Observations[0], got.Observations[1]
	if short.Text != "OK" || short.Reasoning != "thought" || short.TextBytes != 0 {
		t.Errorf("short answer %+v", short)
	}
	if short.Logprobs.Steps != nil || short.Logprobs.Tokens != 1 || short.Logprobs.Null != 1 || !short.Logprobs.Bad() {
		t.Errorf("logprobs %+v", short.Logprobs)
	}
	if !strings.HasPrefix(cut.Text, long[:jsonTextBytes]) || !strings.Contains(cut.Text, "results.jsonl has it whole") || cut.TextBytes != len(long) {
		t.Errorf("long text: %d bytes, full %d", len(cut.Text), cut.TextBytes)
	}
	if cut.ReasoningBytes != 99999 || len(cut.Prompt) > jsonTextBytes+100 {
		t.Errorf("long reasoning: full %d; prompt %d bytes", cut.ReasoningBytes, len(cut.Prompt))
	}
	if n := strings.Count(got.LogTail, "\n") + 1; n != jsonLogLines || !strings.HasSuffix(got.LogTail, "xx\nline ") {
		t.Errorf("log tail of %d lines, ends %q", n, got.LogTail[len(got.LogTail)-10:])
	}
	if r.Observations[0].Logprobs.Steps == nil || r.Observations[1].Text != long || r.LogTail != log.String() {
		t.Error("jsonCell changed the result it was given")
	}
	if short := jsonCell(record.Result{LogTail: "a\nb\n"}); short.LogTail != "a\nb\n" || short.Observations != nil {
		t.Errorf("a short log %q, observations %v", short.LogTail, short.Observations)
	}
}

// TestJSONDocument: report.json, its cells encoded in parallel, is one
// document indented as the encoder indents a whole one, its cells in the
// report's order (more cells than a window of encoders).
func TestJSONDocument(t *testing.T) {
	run := &record.Run{Axes: []record.AxisValues{{Name: "n"}}}
	var results []record.Result
	for i := range 150 {
		v := fmt.Sprintf("v%03d", i)
		run.Axes[0].Values = append(run.Axes[0].Values, v)
		results = append(results, record.Result{
			Cell: matrix.Cell{ID: "n=" + v, Values: []matrix.AxisValue{{Axis: "n", Value: v}}}, Verdict: "crash", Reason: "died " + v,
		})
	}
	var buf bytes.Buffer
	if err := JSON(&buf, record.NewReport(run, results)); err != nil {
		t.Fatal(err)
	}
	var compact, indented bytes.Buffer
	if err := json.Compact(&compact, buf.Bytes()); err != nil {
		t.Fatalf("report.json is not JSON: %v", err)
	}
	json.Indent(&indented, compact.Bytes(), "", "  ")
	if got, want := buf.String(), indented.String()+"\n"; got != want {
		t.Errorf("report.json is not indented as a whole document is: %d bytes, want %d", len(got), len(want))
	}
	var doc struct {
		Cells []record.Result `json:"cells"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cells) != len(results) {
		t.Fatalf("%d cells, want %d", len(doc.Cells), len(results))
	}
	for i, c := range doc.Cells {
		if c.Cell.ID != results[i].Cell.ID || c.Reason != results[i].Reason {
			t.Fatalf("cell %d is %s (%q), want %s", i, c.Cell.ID, c.Reason, results[i].Cell.ID)
		}
	}
}
