package reports

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/bmx-dev/bmx/classify"
)

// Load reads a run directory (run.json and results.jsonl) into a report, so
// any format can be rendered again later. A torn last line is skipped; a
// cell that appears more than once (a resumed run that ran it again) keeps
// its latest result. Results are ordered by the run's axes.
func Load(dir string) (*Report, error) {
	run, err := ReadRun(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not a bmx run directory: %w", dir, err)
	}
	f, err := os.Open(filepath.Join(dir, ResultsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	results, _, err := ReadResults(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResultsFile), err)
	}
	latest := map[string]int{}
	var kept []Result
	for _, r := range results {
		if i, ok := latest[r.Cell.ID]; ok {
			kept[i] = r
			continue
		}
		latest[r.Cell.ID] = len(kept)
		kept = append(kept, r)
	}
	rep := &Report{Run: run, Results: kept}
	rep.SortByAxes()
	return rep, nil
}

// SortByAxes orders results as the config lists the axis values (the first
// axis varies slowest); values an include added come after. Every report
// of a run lists its cells so, whether written when the sweep ends or
// rendered again by bmx report.
func (rep *Report) SortByAxes() {
	rank := func(r Result) []int {
		var out []int
		for _, a := range rep.Run.Axes {
			v, ok := r.Cell.Value(a.Name)
			i := slices.Index(a.Values, v)
			if !ok || i < 0 {
				i = len(a.Values)
			}
			out = append(out, i)
		}
		return out
	}
	slices.SortStableFunc(rep.Results, func(a, b Result) int { return slices.Compare(rank(a), rank(b)) })
}

// Rejudge classifies every result again from its recorded evidence, with the
// classifier bmx has now (the reference cell's answers included).
func (rep *Report) Rejudge() {
	var ref *classify.Reference
	for _, r := range rep.Results {
		if r.Cell.ID == rep.Run.Reference {
			ref = r.AsReference()
		}
	}
	for i := range rep.Results {
		if rep.Results[i].Verdict == classify.Skipped {
			continue
		}
		rep.Results[i].Judge(ref)
	}
}
