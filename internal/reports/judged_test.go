package reports

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestJudgedMark: report.md, report.html and report.json of a run an
// older classifier judged say, in the one sentence every reader uses,
// whether its verdicts are shown as stored or re-judged; a current run's
// say nothing.
func TestJudgedMark(t *testing.T) {
	newRep := func(classifier string) *record.Report {
		run := &record.Run{Name: "j", Started: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			Axes: []record.AxisValues{{Name: "a", Values: []string{"x"}}}}
		r := record.Result{Cell: matrix.Cell{ID: "a=x", Values: []matrix.AxisValue{{Axis: "a", Value: "x"}}}, Verdict: classify.Crash, Classifier: classifier}
		return record.NewReport(run, []record.Result{r})
	}
	stored := "stored verdicts, judged by an older classifier (unrecorded): run bmx report --rejudge"
	rejudged := "judged by an older classifier (unrecorded); re-judged with this bmx's (" + classify.Fingerprint() + ")"
	for _, tc := range []struct {
		name, classifier string
		rejudge          bool
		want             string
	}{
		{"stored", "", false, stored},
		{"rejudged", "", true, rejudged},
		{"current", classify.Fingerprint(), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := newRep(tc.classifier)
			rep.JudgeCurrent(tc.rejudge)
			if rep.JudgedNote != tc.want {
				t.Fatalf("JudgedNote %q, want %q", rep.JudgedNote, tc.want)
			}
			for _, f := range []string{"md", "html", "json"} {
				var buf bytes.Buffer
				if err := Render(f, &buf, rep); err != nil {
					t.Fatal(err)
				}
				out := buf.String()
				switch f {
				case "html":
					out = html.UnescapeString(out)
				case "json":
					var doc struct {
						Judged string `json:"judged"`
					}
					if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
						t.Fatal(err)
					}
					out = doc.Judged
				}
				if tc.want == "" && strings.Contains(out, "older classifier") || tc.want != "" && !strings.Contains(out, tc.want) {
					t.Errorf("%s: want %q in it", f, tc.want)
				}
			}
		})
	}
}
