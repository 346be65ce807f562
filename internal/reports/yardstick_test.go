package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Greedy answers to the river probe, neither expected.
const (
	riverA = "The river runs slowly past the old mill and into the sea. Its water is cold even in summer."
	riverB = "Mountains rise above the valley where the farmers keep their sheep. Snow stays on them until June."
)

// riverResult is cell a=id answering the river probe with text ("" for a
// crash at start), judged as a sweep judges it against ref.
func riverResult(id, text string, ref *classify.Reference) record.Result {
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

// riverRun is a run of the probe file probes (a path) over a=x,y, the
// reference a=x answering refText ("": it crashed) and a=y answering
// yText, as a sweep records and reports it.
func riverRun(day int, probes, refText, yText string) *record.Report {
	run := &record.Run{Name: "river", ProbeSet: probes, Reference: "a=x", Vars: map[string]string{"model": "m"},
		Started: time.Date(2026, 3, day, 0, 0, 0, 0, time.UTC), Axes: []record.AxisValues{{Name: "a", Values: []string{"x", "y"}}}}
	ref := riverResult("x", refText, nil)
	return record.NewReport(run, []record.Result{ref, riverResult("y", yText, ref.AsReference())})
}

// TestDiffYardstickLost: a=y is wrong in the base against its passing
// reference; in the new run the reference crashed and a=y, alone, is
// correct. Where the base's yardstick can judge the new run, the flip says
// what a=y is against it (wrong still: yardstick lost, no fix); where it
// cannot (the probe file changed), a=y's correct rests on nothing: a
// yardstick-lost flip, never a fix, in every format and in the gate.
func TestDiffYardstickLost(t *testing.T) {
	base := riverRun(1, "/ci/a/probes.toml", riverA, riverB)
	if r := base.Result("a=y"); r.Verdict != classify.Wrong {
		t.Fatalf("base a=y: %s (%s)", r.Verdict, r.Reason)
	}
	for _, tc := range []struct {
		name, probes string
		new          classify.Verdict // a=y as the diff judges it
		yardstick    string
	}{
		{"the base's yardstick judges", "/ci/b/probes.toml", classify.Wrong, "its cells are judged against baseline 20260301T000000Z-river:a=x"},
		{"no yardstick left", "/ci/b/probes-v2.toml", classify.Correct, "cannot judge it (it answered the probe set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := riverRun(2, tc.probes, "", riverB)
			if a := next.Agreement; a == nil || a.Status != classify.NoYardstick {
				t.Fatalf("new run's agreement %+v, want split", a)
			}
			d := Compare(base, next)
			if next.Result("a=y").Verdict != classify.Correct || next.Agreement.Baseline != "" {
				t.Error("Compare changed the new run's report")
			}
			if !strings.Contains(d.Yardstick, tc.yardstick) {
				t.Errorf("the diff's yardstick line: %q, want %q", d.Yardstick, tc.yardstick)
			}
			var f *Flip
			for i := range d.Flips {
				if d.Flips[i].Cell == "a=y" {
					f = &d.Flips[i]
				}
			}
			if f == nil || f.Kind != YardstickLost || f.Base != classify.Wrong || f.New != tc.new || f.Note == "" {
				t.Fatalf("a=y's flip: %+v, want yardstick-lost, wrong -> %s", f, tc.new)
			}
			if d.Count(Fix) != 0 || d.Count(YardstickLost) != 1 {
				t.Errorf("counted %d fixes, %d yardstick-lost", d.Count(Fix), d.Count(YardstickLost))
			}
			for name, render := range map[string]func(*bytes.Buffer, *Diff) error{
				"table": func(b *bytes.Buffer, d *Diff) error { return DiffTable(b, d) },
				"md":    func(b *bytes.Buffer, d *Diff) error { return DiffMarkdown(b, d) },
				"json":  func(b *bytes.Buffer, d *Diff) error { return DiffJSON(b, d) },
			} {
				var b bytes.Buffer
				if err := render(&b, d); err != nil {
					t.Fatal(err)
				}
				want := "1 yardstick-lost"
				if name == "json" {
					want = `"kind": "yardstick-lost"`
				}
				if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "yardstick") || fixShown(b.String()) {
					t.Errorf("%s does not show a=y's yardstick lost (or counts a fix):\n%s", name, b.String())
				}
			}
			g, err := Gate(next, []string{Fix, YardstickLost}, base)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Trips) != 1 || g.Trips[0].Word != YardstickLost {
				t.Errorf("the gate's trips: %+v, want a=y's yardstick-lost only", g.Trips)
			}
		})
	}

	// Against the base's yardstick and right, a=y is a fix after all.
	d := Compare(base, riverRun(2, "/ci/b/probes.toml", "", riverA))
	for _, f := range d.Flips {
		if f.Cell == "a=y" && f.Kind != Fix {
			t.Errorf("a=y right against the base's yardstick: %+v, want a fix", f)
		}
	}
}

// fixShown reports a diff that counts or shows a flip as a fix.
func fixShown(s string) bool {
	for _, f := range []string{"1 fix", `"kind": "fix"`, "| fix ", "**fix**"} {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// TestAgreementChanges: the report says which verdicts the agreement
// changed from those the sweep printed as cells ended.
func TestAgreementChanges(t *testing.T) {
	rep := riverRun(2, "/ci/b/probes.toml", "", riverB)
	if s := AgreementChanges(rep); s != "" {
		t.Errorf("nothing changed, but: %q", s)
	}
	base := riverRun(1, "/ci/a/probes.toml", riverA, riverB)
	if used, why := rep.UseBaseline(base.Yardstick()); !used {
		t.Fatal(why)
	}
	want := "1 verdict changed after the agreement among cells (the line each cell printed as it ended came before it): a=y correct -> wrong"
	if s := AgreementChanges(rep); s != want {
		t.Errorf("AgreementChanges = %q, want %q", s, want)
	}
	var b bytes.Buffer
	if err := Table(&b, rep); err != nil || !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "judged against the yardstick of the baseline run") {
		t.Errorf("the table (%v):\n%s", err, b.String())
	}
}
