package record

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
)

// Yardstick is the verified yardstick of an earlier run: the greedy
// answers and logprobs of the cell that run's agreement among cells chose
// (a reference that passed, or the cell of a group of two or more whose
// answers agreed). A later run of the same model and probe set whose own
// agreement leaves it no yardstick (its reference failed and no group
// replaced it, or bmx cannot tell which group is right) is judged against
// it (Report.UseBaseline): yesterday's verified answers are evidence too.
type Yardstick struct {
	// Run names the run it comes from (its directory's name), Cell the
	// cell of that run whose answers it holds.
	Run  string `json:"run"`
	Cell string `json:"cell"`
	// Status is how that run's agreement chose it; Group counts the cells
	// whose greedy answers agreed with it there (1: the reference alone).
	Status classify.AgreementStatus `json:"status"`
	Group  int                      `json:"group"`
	// Model and ProbeSet are what it answered: the served model (as the
	// model-info probe read it, else the run's model var) and the probe
	// set's name.
	Model        string                 `json:"model,omitempty"`
	ProbeSet     string                 `json:"probe_set"`
	Observations []evidence.Observation `json:"observations"`
}

// BaselineFile holds, in a run directory, the yardstick of the run a sweep
// was given as --baseline, so that reading the run again judges it alike.
const BaselineFile = "baseline.json"

// Name is how verdicts and reports name the yardstick: "baseline RUN:cell".
func (y *Yardstick) Name() string { return "baseline " + y.Run + ":" + y.Cell }

// Reference is the yardstick as the classifier compares with it.
func (y *Yardstick) Reference() *classify.Reference {
	return &classify.Reference{Cell: y.Name(), Observations: y.Observations}
}

// how says in words how the yardstick's run chose it.
func (y *Yardstick) how() string {
	if y.Group < 2 {
		return fmt.Sprintf("its reference, which passed there (%s)", y.Status)
	}
	return fmt.Sprintf("vouched for there by %d %s whose greedy answers agreed (%s)", y.Group-1, cellWord(y.Group-1), y.Status)
}

func cellWord(n int) string {
	if n == 1 {
		return "cell"
	}
	return "cells"
}

// Yardstick is the report's verified yardstick, for judging a later run
// by: the cell its agreement chose, confirmed, an outlier's replacement,
// a failed reference's replacement or the winner without a reference (each
// with a group of two or more), or a reference that passed unconfirmed;
// or the baseline yardstick the run was itself judged against. Nil when
// the agreement chose none (split, cannot tell) or the chosen cell is not
// correct.
func (rep *Report) Yardstick() *Yardstick {
	a := rep.Agreement
	if a == nil {
		return nil
	}
	if a.Baseline != "" {
		return rep.baseline
	}
	switch a.Status {
	case classify.RefConfirmed, classify.RefOutlier, classify.RefBroken, classify.NoReference:
		if len(a.Group) < 2 {
			return nil
		}
	case classify.RefUnconfirmed:
	default:
		return nil
	}
	r := rep.Result(a.Yardstick)
	if r == nil || r.Verdict != classify.Correct {
		return nil
	}
	return &Yardstick{Run: rep.Label(), Cell: r.Cell.ID, Status: a.Status, Group: max(1, len(a.Group)),
		Model: modelOf(rep.Results, rep.Run), ProbeSet: rep.Run.ProbeSet, Observations: r.Observations}
}

// Label names the run for a reader: its directory's name, or its name and
// start when the report was not read from a directory.
func (rep *Report) Label() string {
	if rep.Dir != "" {
		return filepath.Base(rep.Dir)
	}
	return rep.Run.Started.UTC().Format("20060102T150405Z") + "-" + rep.Run.Name
}

// modelOf is the model a run served: what its model-info probe read, or
// its model var when no cell answered one.
func modelOf(results []Result, run *Run) string {
	for _, r := range results {
		for _, o := range r.Observations {
			if o.Kind == evidence.ModelInfo && o.Answered() && strings.TrimSpace(o.Text) != "" {
				return strings.TrimSpace(o.Text)
			}
		}
	}
	return run.Vars["model"]
}

// Fits says why the yardstick cannot judge the report's cells ("" when it
// can): another probe set, another model, a probe of the same name that
// asks something else, or no request in common. run.json names a probe
// file by its path, not by what it held, so a file of the same name
// elsewhere (another checkout) may fit: the requests themselves decide.
func (y *Yardstick) Fits(rep *Report) string {
	if !sameProbeSet(y.ProbeSet, rep.Run.ProbeSet) {
		return fmt.Sprintf("it answered the probe set %q, this run %q", y.ProbeSet, rep.Run.ProbeSet)
	}
	if m := modelOf(rep.Results, rep.Run); m != y.Model {
		return fmt.Sprintf("it answered the model %q, this run %q", y.Model, m)
	}
	asked := map[string]evidence.Observation{}
	for _, r := range rep.Results {
		for _, o := range r.Observations {
			k := fmt.Sprintf("%s#%d", o.Probe, o.Request)
			if _, ok := asked[k]; !ok {
				asked[k] = o
			}
		}
	}
	common := 0
	for _, o := range y.Observations {
		t, ok := asked[fmt.Sprintf("%s#%d", o.Probe, o.Request)]
		if !ok {
			continue
		}
		if !sameRequest(o, t) {
			return fmt.Sprintf("its probe %s asked something else than this run's", o.Probe)
		}
		common++
	}
	if common == 0 && len(asked) > 0 {
		return "it answered none of the requests this run's cells answered"
	}
	return ""
}

// sameProbeSet reports two runs' probe sets as alike by name: the same
// built-in set, or probe files of the same file name.
func sameProbeSet(a, b string) bool {
	if a == b {
		return true
	}
	file := func(s string) bool { return strings.ContainsAny(s, `/\.`) }
	return file(a) && file(b) && filepath.Base(a) == filepath.Base(b)
}

// sameRequest reports two observations of one request as asked alike.
func sameRequest(a, b evidence.Observation) bool {
	return a.Kind == b.Kind && a.Prompt == b.Prompt && a.Thinking == b.Thinking && a.MaxTokens == b.MaxTokens &&
		reflect.DeepEqual(a.Temperature, b.Temperature) && reflect.DeepEqual(a.Expect, b.Expect)
}

// WriteYardstick writes the baseline's yardstick into a run directory.
func WriteYardstick(dir string, y *Yardstick) error {
	return writeJSON(dir, BaselineFile, y)
}

// ReadYardstick reads a run directory's baseline yardstick (nil, nil when
// it has none).
func ReadYardstick(dir string) (*Yardstick, error) {
	return readOptionalJSON[Yardstick](dir, BaselineFile)
}

// UseBaseline has the report judged against y where its own agreement
// leaves it no yardstick: it says whether y now judges the report's cells,
// and, when it cannot, why ("" when the report needs none, has one of its
// own, already has a baseline's, or y is nil).
func (rep *Report) UseBaseline(y *Yardstick) (bool, string) {
	a := rep.Agreement
	if y == nil || a == nil || a.Baseline != "" || !a.NeedsBaseline() {
		return false, ""
	}
	if why := y.Fits(rep); why != "" {
		return false, why
	}
	rep.baseline = y
	rep.agree()
	return rep.Agreement != nil && rep.Agreement.Baseline != "", ""
}

// judges says what the yardstick is, for the note of an agreement it
// judges the cells of.
func (y *Yardstick) judges() string {
	return fmt.Sprintf("the yardstick of the baseline run %s: its cell %s, %s; the same model and probe set", y.Run, y.Cell, y.how())
}

// OwnYardstickLost says why the run's own cells have no yardstick ("" when
// their agreement chose one): its reference failed (or did not run) and no
// group of agreeing cells replaced it, no two cells agree, bmx cannot tell
// which group is right, or no cell answered a greedy probe. A run judged
// against a baseline's yardstick has lost its own too.
func (rep *Report) OwnYardstickLost() string {
	a := rep.Agreement
	switch {
	case a == nil:
		return "no cell answered a greedy probe"
	case a.Baseline != "" || a.NeedsBaseline():
		return noYardstick(rep, a)
	}
	return ""
}

// noYardstick says why an agreement that chose no yardstick chose none.
func noYardstick(rep *Report, a *classify.Agreement) string {
	r := rep.Result(a.Reference)
	return a.NoYardstick(r != nil && r.Ran())
}

// AloneCorrect reports a result whose evidence alone, against no
// yardstick, is correct: a degraded or wrong verdict of it came from the
// yardstick only. (A yardstick only ever turns a correct answer wrong or
// degraded, so a correct one is correct alone.)
func (r *Result) AloneCorrect() bool {
	if r.Verdict == classify.Correct {
		return true
	}
	return classify.Cell(r.Input()).Verdict == classify.Correct
}
