package record

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// Two greedy answers to one prompt, neither expected: only a yardstick or
// agreeing cells can say which is right.
const (
	answerA = "The river runs slowly past the old mill and into the sea. Its water is cold even in summer."
	answerB = "Mountains rise above the valley where the farmers keep their sheep. Snow stays on them until June."
)

// storyCell is a cell of the axes a and b that answered the river probe
// with text, judged as a sweep judges it (against no reference).
func storyCell(a, b, text string) Result {
	n := 20
	r := Result{
		Cell: matrix.Cell{ID: "a=" + a + ",b=" + b, Values: []matrix.AxisValue{{Axis: "a", Value: a}, {Axis: "b", Value: b}}},
		Observations: []evidence.Observation{{Probe: "river", Kind: evidence.Chat, Prompt: "Write two sentences about the river.",
			MaxTokens: 64, Text: text, FinishReason: "stop", HTTPStatus: 200, Tokens: &n}},
	}
	r.Judge(nil)
	return r
}

// storyRun is a run of the story probe file (in dir) over a=x,y b=p,q.
func storyRun(dir string, day int) *Run {
	return &Run{Name: "story", ProbeSet: filepath.Join(dir, "probes.toml"), Vars: map[string]string{"model": "m"},
		Started: time.Date(2026, 3, day, 0, 0, 0, 0, time.UTC),
		Axes:    []AxisValues{{Name: "a", Values: []string{"x", "y"}}, {Name: "b", Values: []string{"p", "q"}}}}
}

// tieReport is a run bmx cannot decide: two groups of two cells give
// different answers, and neither group's make-up explains its agreement.
func tieReport(dir string) *Report {
	return NewReport(storyRun(dir, 2), []Result{
		storyCell("x", "p", answerA), storyCell("y", "q", answerA),
		storyCell("x", "q", answerB), storyCell("y", "p", answerB),
	})
}

// baseReport is an earlier run whose two cells agree on answerA (no
// reference configured): a verified yardstick.
func baseReport(dir string) *Report {
	rep := NewReport(storyRun(dir, 1), []Result{storyCell("x", "p", answerA), storyCell("y", "q", answerA)})
	rep.Dir = filepath.Join(dir, "runs", "20260301T000000Z-story")
	return rep
}

// TestBaselineDecidesCannotTell: a run whose cells fall into two groups
// bmx cannot choose between is judged against the baseline's verified
// yardstick: the group that agrees with it is correct with evidence, the
// other wrong (correct alone), the note and the agreement name the
// baseline, the verdicts it changed are listed, and the report is judged
// alike when read again from its directory (baseline.json).
func TestBaselineDecidesCannotTell(t *testing.T) {
	dir := t.TempDir()
	rep := tieReport(dir)
	if a := rep.Agreement; a == nil || a.Status != classify.Undecided {
		t.Fatalf("the tie: agreement %+v, want cannot tell", a)
	}
	if rep.Yardstick() != nil {
		t.Error("a run that cannot tell lends a yardstick")
	}
	base := baseReport(dir)
	y := base.Yardstick()
	if y == nil || y.Status != classify.NoReference || y.Group != 2 || y.Cell != "a=x,b=p" || y.Run != "20260301T000000Z-story" {
		t.Fatalf("the base's yardstick: %+v", y)
	}
	check := func(from string, rep *Report) {
		t.Helper()
		a := rep.Agreement
		name := "baseline 20260301T000000Z-story:a=x,b=p"
		if a == nil || a.Baseline != name || a.Yardstick != name || a.Unconfirmed != nil ||
			!strings.Contains(a.Note, "fall into 2 groups and bmx cannot tell which is right, so cells are judged against the yardstick of the baseline run 20260301T000000Z-story") {
			t.Errorf("%s: agreement %+v", from, a)
		}
		for _, id := range []string{"a=x,b=p", "a=y,b=q"} {
			if r := rep.Result(id); r.Verdict != classify.Correct || r.ShapeOnly || r.Alone != "" || strings.Contains(r.Reason, "unconfirmed") {
				t.Errorf("%s: %s is %s (shape only %v, alone %q): %s; want correct against the baseline", from, id, r.Verdict, r.ShapeOnly, r.Alone, r.Reason)
			}
		}
		for _, id := range []string{"a=x,b=q", "a=y,b=p"} {
			if r := rep.Result(id); r.Verdict != classify.Wrong || r.Alone != classify.Correct || !strings.Contains(r.Reason, name) {
				t.Errorf("%s: %s is %s (alone %q): %s; want wrong against %s, correct alone", from, id, r.Verdict, r.Alone, r.Reason, name)
			}
		}
		if len(rep.Changed) != 2 || rep.Changed[0].From != classify.Correct || rep.Changed[0].To != classify.Wrong {
			t.Errorf("%s: changed %+v, want the two cells of the other group correct -> wrong", from, rep.Changed)
		}
	}
	if used, why := rep.UseBaseline(y); !used || why != "" {
		t.Fatalf("UseBaseline: %v, %q", used, why)
	}
	check("UseBaseline", rep)
	if used, _ := rep.UseBaseline(y); used {
		t.Error("a baseline's yardstick was used twice")
	}
	if got := rep.Yardstick(); got != y {
		t.Errorf("a run judged against a baseline lends %+v, want the baseline's own", got)
	}

	// A sweep records the yardstick beside its results: read again, the
	// run is judged alike, and by Rejudge too.
	runDir := filepath.Join(dir, "runs", "tie")
	writeRunDir(t, runDir, rep)
	if err := WriteYardstick(runDir, y); err != nil {
		t.Fatal(err)
	}
	again, err := Load(runDir)
	if err != nil {
		t.Fatal(err)
	}
	check("Load", again)
	again.Rejudge()
	check("Rejudge", again)
}

// writeRunDir writes rep's run.json and its results as judged when their
// cells ran.
func writeRunDir(t *testing.T, dir string, rep *Report) {
	t.Helper()
	var results []Result
	for i, r := range rep.Results {
		r.Judge(nil)
		if rep.recorded != nil {
			r.Verdict = rep.recorded[i]
		}
		results = append(results, r)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteRun(dir, rep.Run); err != nil {
		t.Fatal(err)
	}
	if err := WriteResults(filepath.Join(dir, ResultsFile), results); err != nil {
		t.Fatal(err)
	}
}

// TestYardstickVerified: only a yardstick the run's own agreement chose
// is lent: a reference that passed (alone: unconfirmed) or a group of two
// or more; never a split run's or an undecided one's.
func TestYardstickVerified(t *testing.T) {
	dir := t.TempDir()
	run := storyRun(dir, 1)
	ref := func(text string) *Report {
		run := *run
		run.Reference = "a=x,b=p"
		return NewReport(&run, []Result{storyCell("x", "p", answerA), storyCell("y", "q", text)})
	}
	for _, tc := range []struct {
		name  string
		rep   *Report
		group int // 0: none lent
	}{
		{"confirmed", ref(answerA), 2},
		{"unconfirmed", ref(answerB), 1},
		{"no reference, a group", baseReport(dir), 2},
		{"no reference, split", NewReport(run, []Result{storyCell("x", "p", answerA), storyCell("y", "q", answerB)}), 0},
		{"cannot tell", tieReport(dir), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := tc.rep.Yardstick()
			switch {
			case tc.group == 0 && y != nil:
				t.Errorf("lends %+v (agreement %+v)", y, tc.rep.Agreement)
			case tc.group > 0 && (y == nil || y.Group != tc.group || y.Cell != "a=x,b=p" || y.Model != "m"):
				t.Errorf("lends %+v, want a=x,b=p with a group of %d (agreement %+v)", y, tc.group, tc.rep.Agreement)
			}
		})
	}
}

// TestYardstickFits: a yardstick judges only a run of the same model and
// probe set (a probe file of the same name in another directory fits when
// it asks the same), never one that asks otherwise or nothing alike.
func TestYardstickFits(t *testing.T) {
	dir := t.TempDir()
	y := baseReport(dir).Yardstick()
	elsewhere := tieReport(t.TempDir())
	if why := y.Fits(elsewhere); why != "" {
		t.Errorf("the same probe file elsewhere: %s", why)
	}
	for _, tc := range []struct {
		name, why string
		change    func(*Report)
	}{
		{"a built-in set", `this run "smoke"`, func(r *Report) { r.Run.ProbeSet = "smoke" }},
		{"another file", `other.toml"`, func(r *Report) { r.Run.ProbeSet = filepath.Join(dir, "other.toml") }},
		{"another model", `this run "m2"`, func(r *Report) { r.Run.Vars = map[string]string{"model": "m2"} }},
		{"another prompt", "its probe river asked something else", func(r *Report) {
			for i := range r.Results {
				r.Results[i].Observations[0].Prompt = "Write two sentences about the lake."
			}
		}},
		{"nothing alike", "none of the requests", func(r *Report) {
			for i := range r.Results {
				r.Results[i].Observations[0].Probe = "lake"
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := tieReport(dir)
			tc.change(rep)
			if why := y.Fits(rep); !strings.Contains(why, tc.why) {
				t.Errorf("Fits: %q, want %q", why, tc.why)
			}
			if used, why := rep.UseBaseline(y); used || !strings.Contains(why, tc.why) {
				t.Errorf("UseBaseline: %v, %q", used, why)
			}
			if rep.Agreement.Status != classify.Undecided || rep.Agreement.Baseline != "" {
				t.Errorf("an unfit baseline changed the agreement: %+v", rep.Agreement)
			}
		})
	}
}

// TestCannotTellJudgesLoners: in a contest bmx cannot decide, a cell whose
// answers agree with none of the groups fails against each of them: wrong
// if any group is right, right only if both are wrong, so it is
// inconclusive (naming the failure against the group it names), never
// passed as correct* nor condemned; the cells of the groups stay
// unconfirmed.
func TestCannotTellJudgesLoners(t *testing.T) {
	dir := t.TempDir()
	run := storyRun(dir, 2)
	run.Axes[0].Values = append(run.Axes[0].Values, "z")
	const answerC = "Seven ravens sat on the fence and argued about the weather. Nobody listened to them."
	rep := NewReport(run, []Result{
		storyCell("x", "p", answerA), storyCell("y", "q", answerA),
		storyCell("x", "q", answerB), storyCell("y", "p", answerB),
		storyCell("z", "p", answerC),
	})
	if a := rep.Agreement; a == nil || a.Status != classify.Undecided || len(a.Groups) != 2 {
		t.Fatalf("agreement %+v, want cannot tell between two groups", a)
	}
	loner := rep.Result("a=z,b=p")
	if loner.Verdict != classify.Inconclusive || loner.ShapeOnly || !strings.HasPrefix(loner.Reason, "its answers fail against each of the 2 groups bmx cannot choose between (wrong if any group is right, right only if all are wrong): wrong against group ") {
		t.Errorf("the loner is %s (shape only %v): %s; want inconclusive, failing against every group", loner.Verdict, loner.ShapeOnly, loner.Reason)
	}
	for _, id := range []string{"a=x,b=p", "a=y,b=q", "a=x,b=q", "a=y,b=p"} {
		if r := rep.Result(id); r.Verdict != classify.Correct || !strings.HasPrefix(r.Reason, "unconfirmed: answers with group") {
			t.Errorf("%s is %s: %s; want correct*, unconfirmed", id, r.Verdict, r.Reason)
		}
	}
	if len(rep.Changed) != 1 || rep.Changed[0].Cell != "a=z,b=p" || rep.Changed[0].To != classify.Inconclusive {
		t.Errorf("changed %+v, want the loner correct -> inconclusive", rep.Changed)
	}
}
