package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// recordedSteps are the greedy top-5 logprobs real llama.cpp gave for one
// probe, per cell (examples/llamacpp/testdata): the reference first, then
// f32, bf16 and quantized-K cells.
func recordedSteps(t *testing.T) [][]evidence.Step {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "llamacpp", "testdata", "once-logprobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Cells []struct {
			Steps []evidence.Step `json:"steps"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	var out [][]evidence.Step
	for _, c := range rec.Cells {
		out = append(out, c.Steps)
	}
	return out
}

// degradedFixture is the fixture run with the reference cell answering
// with the reference's logprobs and the correct cell answering right with
// the quantized-K cell's: the classifier finds it degraded.
func degradedFixture(t *testing.T) (*record.Report, *record.Report) {
	t.Helper()
	steps := recordedSteps(t)
	obs := func(s []evidence.Step) []evidence.Observation {
		n := len(s)
		return []evidence.Observation{{Probe: "say-ok", Kind: evidence.Chat, Prompt: "Say 'OK'", Expect: &evidence.Expect{Contains: "OK"},
			Text: "OK", FinishReason: "stop", HTTPStatus: 200, Tokens: &n, Logprobs: &evidence.Logprobs{Tokens: n, Steps: s}}}
	}
	rep := fixture()
	rep.Run.Reference = "moe=trtllm,fp4=cutlass"
	var ref *record.Result
	for i := range rep.Results {
		switch r := &rep.Results[i]; r.Cell.ID {
		case rep.Run.Reference:
			r.Observations, r.TimedOut, r.Exit, r.LogTail = obs(steps[0]), false, nil, ""
			r.Judge(nil)
			ref = r
		case "moe=cutlass,fp4=cudnn":
			r.Observations = obs(steps[3])
		}
	}
	base := fixture()
	base.Run.Reference = rep.Run.Reference
	for i := range base.Results {
		if base.Results[i].Cell.ID == rep.Run.Reference {
			base.Results[i] = *ref
		}
	}
	base.Rejudge()
	rep.Rejudge()
	return base, rep
}

func TestDegradedReports(t *testing.T) {
	base, rep := degradedFixture(t)
	var r, b record.Result
	for i := range rep.Results {
		if rep.Results[i].Cell.ID == "moe=cutlass,fp4=cudnn" {
			r, b = rep.Results[i], base.Results[i]
		}
	}
	if b.Verdict != classify.Correct || b.Numerics != nil {
		t.Fatalf("base: %s (%s), numerics %+v", b.Verdict, b.Reason, b.Numerics)
	}
	if r.Verdict != classify.Degraded || r.Numerics == nil || r.Numerics.KL <= classify.DegradedKL {
		t.Fatalf("%s (%s), numerics %+v", r.Verdict, r.Reason, r.Numerics)
	}
	figure := "KL " + formatKL(r.Numerics.KL) + " nats/token"
	render := func(f func(*bytes.Buffer, *record.Report) error) string {
		var buf bytes.Buffer
		if err := f(&buf, rep); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	table := render(func(b *bytes.Buffer, r *record.Report) error { return Table(b, r) })
	md := render(func(b *bytes.Buffer, r *record.Report) error { return Markdown(b, r) })
	html := render(func(b *bytes.Buffer, r *record.Report) error { return HTML(b, r) })
	js := render(func(b *bytes.Buffer, r *record.Report) error { return JSON(b, r) })
	for name, out := range map[string]string{"table": table, "md": md, "html": html} {
		if !strings.Contains(out, "degraded = the answers pass") || !strings.Contains(out, figure) {
			t.Errorf("%s: no degraded legend or figure %q:\n%s", name, figure, out)
		}
	}
	for name, out := range map[string]string{"md": md, "html": html} {
		if !strings.Contains(out, "Numerics against the reference cell moe=trtllm,fp4=cutlass") || !strings.Contains(out, "first differing token") {
			t.Errorf("%s: cell details lack the numerics", name)
		}
	}
	var back struct {
		Cells []record.Result `json:"cells"`
	}
	if err := json.Unmarshal([]byte(js), &back); err != nil {
		t.Fatal(err)
	}
	for _, c := range back.Cells {
		if c.Cell.ID == r.Cell.ID && (c.Numerics == nil || c.Numerics.KL != r.Numerics.KL || c.Numerics.Threshold != classify.DegradedKL || len(c.Numerics.Probes) != 1) {
			t.Errorf("report.json numerics %+v", c.Numerics)
		}
	}
	// results.jsonl keeps the figures, and a report re-judged from it
	// agrees.
	var store bytes.Buffer
	for _, res := range rep.Results {
		line, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		store.Write(append(line, '\n'))
	}
	results, _, err := record.ReadResults(&store)
	if err != nil {
		t.Fatal(err)
	}
	again := &record.Report{Run: rep.Run, Results: results}
	again.Rejudge()
	for _, res := range again.Results {
		if res.Cell.ID == r.Cell.ID && (res.Verdict != classify.Degraded || res.Numerics == nil || res.Numerics.KL != r.Numerics.KL) {
			t.Errorf("re-judged: %s, numerics %+v", res.Verdict, res.Numerics)
		}
		if res.Cell.ID == rep.Run.Reference && res.Numerics != nil {
			t.Errorf("the reference cell is compared with itself: %+v", res.Numerics)
		}
	}
	// A flip from correct to degraded is a regression; back is a fix.
	d := Compare(base, rep)
	if d.Count(Regression) != 1 || d.Flips[0].New != classify.Degraded {
		t.Errorf("diff %+v", d.Flips)
	}
	if d := Compare(rep, base); d.Count(Fix) != 1 {
		t.Errorf("reverse diff %+v", d.Flips)
	}
	// The fixture's known issue for this cell expects nan: degraded is
	// another failure, news (CHANGED, with both verdicts).
	if st := statusText(rep, r); st != "CHANGED (known nan, degraded now)" {
		t.Errorf("known status %q", st)
	}
	if !classify.Degraded.Valid() {
		t.Error("degraded is not a verdict --fail-on accepts")
	}
}
