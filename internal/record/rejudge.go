package record

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
)

// Judged says which classifiers judged a report's cells and, where any is
// not this bmx's, what judging them again (Rejudge) would change.
type Judged struct {
	// Classifier is this bmx's (classify.Fingerprint).
	Classifier string
	// Others are the other classifiers that judged cells, sorted ("" for
	// cells recorded before bmx recorded one); Stale counts those cells.
	Others []string
	Stale  int
	// Changes are the cells whose verdict (as reports show it) Rejudge
	// changes, in the report's order.
	Changes []Change
}

// Change is a cell whose verdict judging again changes.
type Change struct {
	Cell, From, To string
}

// Current says every cell that ran was judged by this bmx's classifier.
func (j Judged) Current() bool { return j.Stale == 0 }

// Judged reports which classifiers judged the cells that ran and, if any was
// not this bmx's, what Rejudge would change (the report itself is left as
// it is).
func (rep *Report) Judged() Judged {
	j := Judged{Classifier: classify.Fingerprint()}
	for _, r := range rep.Results {
		if !r.Ran() || r.Classifier == j.Classifier {
			continue
		}
		j.Stale++
		if !slices.Contains(j.Others, r.Classifier) {
			j.Others = append(j.Others, r.Classifier)
		}
	}
	slices.Sort(j.Others)
	if j.Stale == 0 {
		return j
	}
	again := rep.Clone() // with its baseline's yardstick, if it has one
	again.Rejudge()
	for i, r := range rep.Results {
		if now := again.Results[i].Shown(); now != r.Shown() {
			j.Changes = append(j.Changes, Change{Cell: r.Cell.ID, From: r.Shown(), To: now})
		}
	}
	return j
}

// JudgeCurrent is what every reader of a run does about cells an older
// classifier judged, so that each says it alike: with rejudge, those cells
// are judged again by this bmx's classifier (Rejudge); either way
// JudgedNote gets the sentence (Judged.Sentence) that says which verdicts
// the report shows. A report whose cells are all current is left as it is.
// It returns what Judged found before.
func (rep *Report) JudgeCurrent(rejudge bool) Judged {
	j := rep.Judged()
	if j.Current() {
		return j
	}
	if rejudge {
		rep.Rejudge()
	}
	rep.JudgedNote = j.Sentence(rejudge)
	return j
}

// Sentence says, in the words every reader uses (the terminal, each report
// format, history, publish), that cells were judged by an older classifier
// and whether they were re-judged with this bmx's or are shown as stored.
// "" when every cell is current.
func (j Judged) Sentence(rejudged bool) string {
	if j.Current() {
		return ""
	}
	by := make([]string, len(j.Others))
	for i, c := range j.Others {
		by[i] = c
		if c == "" {
			by[i] = "unrecorded"
		}
	}
	if rejudged {
		return fmt.Sprintf("judged by an older classifier (%s); re-judged with this bmx's (%s)", strings.Join(by, ", "), j.Classifier)
	}
	return fmt.Sprintf("stored verdicts, judged by an older classifier (%s): run bmx report --rejudge", strings.Join(by, ", "))
}

// RejudgeRun judges the cells of the run directory dir again with this bmx's
// classifier and rewrites its results.jsonl with the new verdicts (each
// result as a sweep records it: against the reference cell, the agreement
// among cells being applied whenever the run is read), so that the
// verdicts stored are the ones this bmx gives. A note in run.json says when,
// by what (by: a bmx version, a command), with which classifier, and what
// changed. It returns what changed, as Judged reported it before.
func RejudgeRun(dir, by string) (Judged, error) {
	rep, err := Load(dir)
	if err != nil {
		return Judged{}, err
	}
	j := rep.Judged()
	if j.Current() {
		return j, nil
	}
	path := filepath.Join(dir, ResultsFile)
	f, err := os.Open(path)
	if err != nil {
		return j, err
	}
	results, _, err := ReadResults(f)
	f.Close()
	if err != nil {
		return j, fmt.Errorf("%s: %w", path, err)
	}
	var ref *classify.Reference
	for _, r := range results {
		if r.Cell.ID == rep.Run.Reference && r.Ran() {
			ref = r.AsReference() // the latest run of it, as Load keeps
		}
	}
	judge := classify.NewJudge()
	for i := range results {
		if results[i].Ran() {
			results[i].JudgeBy(judge, ref)
		}
	}
	if err := WriteResults(path, results); err != nil {
		return j, err
	}
	note := fmt.Sprintf("re-judged %s by %s (classifier %s): %d verdicts changed", time.Now().UTC().Format("2006-01-02"), by, j.Classifier, len(j.Changes))
	if len(j.Changes) > 0 {
		var cs []string
		for _, c := range j.Changes {
			cs = append(cs, fmt.Sprintf("%s was %s, now %s", c.Cell, c.From, c.To))
		}
		note += ": " + strings.Join(cs, "; ")
	}
	rep.Run.Notes = append(rep.Run.Notes, note)
	return j, WriteRun(dir, rep.Run)
}
