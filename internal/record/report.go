package record

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/bmx-dev/bmx/internal/classify"
)

// Report is one run's metadata and results as recorded: what a finished
// sweep hands on and Load reads back, the input of every renderer.
type Report struct {
	Run     *Run
	Results []Result
	// Agreement is what the cells' greedy answers say about each other and
	// which cell they are judged against (nil: nothing to agree on).
	Agreement *classify.Agreement
	// Dir is the run directory the report was read from ("" when it was
	// not read from one).
	Dir string
	// Changed are the cells whose verdict the agreement among cells
	// changed: each as judged when it ran (what the sweep printed) and as
	// judged against the yardstick the cells chose, or with none.
	Changed []classify.VerdictChange
	// JudgedNote says, when cells were judged by another classifier than
	// this bmx's, whether the report shows them re-judged or as stored
	// (JudgeCurrent); "" when every cell is current.
	JudgedNote string
	// baseline is an earlier run's verified yardstick that judges the
	// cells when their own agreement leaves them none (UseBaseline, or
	// the run directory's BaselineFile).
	baseline *Yardstick
	// recorded are the results' verdicts before the agreement, by index:
	// what applying it again starts from.
	recorded []classify.Verdict
	// lines are where each cell's result lies in results.jsonl, when the
	// report was read so (loadWithLines: a Summary reads them back).
	lines map[string]lineRef
}

// Load reads a run directory (run.json and results.jsonl) into a report, so
// any format can be rendered again later. A torn last line is skipped; a
// cell that appears more than once (a resumed run that ran it again) keeps
// its latest result. Results are ordered by the run's axes.
func Load(dir string) (*Report, error) {
	rep, err := LoadRecorded(dir)
	if err != nil {
		return nil, err
	}
	rep.agree()
	return rep, nil
}

// LoadRecorded is Load without the agreement among cells: each result as
// its cell was judged when it ran. What makes a run of several (a merge)
// reads its parts so and applies the agreement once, to the whole, rather
// than judging every part's cells again first.
func LoadRecorded(dir string) (*Report, error) {
	return loadRecorded(dir, false)
}

// loadRecorded is LoadRecorded that, withLines, also keeps where each
// cell's line lies in results.jsonl (Report.lines).
func loadRecorded(dir string, withLines bool) (*Report, error) {
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
	var at []lineRef
	if withLines {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		if at, err = lineRefs(f, len(results)); err != nil {
			return nil, err
		}
	}
	baseline, err := ReadYardstick(dir)
	if err != nil {
		return nil, err
	}
	rep := newRecordedReport(run, results)
	rep.Dir, rep.baseline = dir, baseline
	if withLines {
		rep.lines = make(map[string]lineRef, len(results))
		for i, r := range results {
			rep.lines[r.Cell.ID] = at[i] // the latest line of a cell, as newRecordedReport keeps
		}
	}
	return rep, nil
}

// NewReport is a run's report from its results as recorded: a cell
// recorded more than once (a resumed run that ran it again) keeps its latest
// result, and results are ordered by the run's axes. Load and a finished
// sweep both make their report so, so the reports written when a sweep
// ends and those bmx report renders again list the same cells alike.
func NewReport(run *Run, results []Result) *Report {
	rep := newRecordedReport(run, results)
	rep.agree()
	return rep
}

// newRecordedReport is NewReport without the agreement among cells.
func newRecordedReport(run *Run, results []Result) *Report {
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
	rep.sortByAxes()
	return rep
}

// sortByAxes orders results as the config lists the axis values (the first
// axis varies slowest); values an include added come after.
func (rep *Report) sortByAxes() {
	index := make([]map[string]int, len(rep.Run.Axes)) // per axis, each value's place
	for i, a := range rep.Run.Axes {
		index[i] = make(map[string]int, len(a.Values))
		for j, v := range a.Values {
			if _, dup := index[i][v]; !dup {
				index[i][v] = j
			}
		}
	}
	// Each result's rank is worked out once, not at every comparison.
	ranks := make(map[string][]int, len(rep.Results))
	for _, r := range rep.Results {
		rank := make([]int, len(rep.Run.Axes))
		for i, a := range rep.Run.Axes {
			v, ok := r.Cell.Value(a.Name)
			j, found := index[i][v]
			if !ok || !found {
				j = len(a.Values)
			}
			rank[i] = j
		}
		ranks[r.Cell.ID] = rank
	}
	slices.SortStableFunc(rep.Results, func(a, b Result) int { return slices.Compare(ranks[a.Cell.ID], ranks[b.Cell.ID]) })
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
	judge := classify.NewJudge()
	for i := range rep.Results {
		if !rep.Results[i].Ran() { // skipped, excluded, predicted: nothing to judge
			continue
		}
		rep.Results[i].JudgeBy(judge, ref)
	}
	rep.recorded = nil
	rep.agree()
}

// Clone is a copy of the report whose results can be judged again (by
// UseBaseline) without changing the report's.
func (rep *Report) Clone() *Report {
	c := *rep
	c.Results = slices.Clone(rep.Results)
	c.Changed = slices.Clone(rep.Changed)
	c.recorded = slices.Clone(rep.recorded)
	return &c
}

// agree applies the agreement among cells (classify.ApplyAgreement) to the
// results that ran, starting from their verdicts as recorded, so it may be
// applied again; the baseline's yardstick (UseBaseline, or the run
// directory's BaselineFile) is offered where the cells choose none.
func (rep *Report) agree() {
	if len(rep.recorded) != len(rep.Results) {
		rep.recorded = make([]classify.Verdict, len(rep.Results))
		for i := range rep.Results {
			rep.recorded[i] = rep.Results[i].Verdict
		}
	}
	var peers []classify.Peer
	cells := &agreeing{rep: rep}
	for i := range rep.Results {
		r := &rep.Results[i]
		if !r.Ran() {
			continue
		}
		values := make(map[string]string, len(r.Cell.Values))
		for _, v := range r.Cell.Values {
			values[v.Axis] = v.Value
		}
		peers = append(peers, classify.Peer{Cell: r.Cell.ID, Values: values, In: r.Input(), Verdict: rep.recorded[i], Follows: r.InheritedFrom, Apart: r.Apart})
		cells.idx = append(cells.idx, i)
	}
	var base *classify.Baseline
	if y := rep.baseline; y != nil {
		base = &classify.Baseline{Reference: y.Reference(), Unfit: func() string { return y.Fits(rep) }, Judges: y.judges()}
	}
	rep.Agreement, rep.Changed = classify.ApplyAgreement(peers, rep.Run.Reference, base, cells)
}

// agreeing is the report's results that ran as the agreement among cells
// judges them (classify.Cells): the peer i is the result at idx[i].
type agreeing struct {
	rep   *Report
	idx   []int
	judge *classify.Judge
}

func (c *agreeing) result(i int) *Result { return &c.rep.Results[c.idx[i]] }

func (c *agreeing) Judge(i int, ref *classify.Reference) classify.Verdict {
	if c.judge == nil {
		c.judge = classify.NewJudge()
	}
	// Reading the run applies the agreement; the cell stays recorded as
	// judged by whichever classifier judged it.
	r := c.result(i)
	judgedBy := r.Classifier
	r.JudgeBy(c.judge, ref)
	r.Classifier = judgedBy
	return r.Verdict
}

func (c *agreeing) Try(i int, ref *classify.Reference) classify.Verdict {
	if c.judge == nil {
		c.judge = classify.NewJudge()
	}
	r := *c.result(i)
	r.JudgeBy(c.judge, ref)
	return r.Verdict
}

func (c *agreeing) Judged(i int) (classify.Verdict, string, bool) {
	r := c.result(i)
	return r.Verdict, r.Reason, r.ShapeOnly
}

func (c *agreeing) Set(i int, v classify.Verdict, reason string, shapeOnly bool) {
	r := c.result(i)
	r.Verdict, r.Reason, r.ShapeOnly = v, reason, shapeOnly
}

func (c *agreeing) SetAlone(i int, v classify.Verdict) { c.result(i).Alone = v }
func (c *agreeing) SetVouched(i int, by []string)      { c.result(i).VouchedBy = by }

// Result is the result of the cell id, nil when the report has none.
func (rep *Report) Result(id string) *Result {
	for i := range rep.Results {
		if rep.Results[i].Cell.ID == id {
			return &rep.Results[i]
		}
	}
	return nil
}

// Summary counts cells per verdict.
func (rep *Report) Summary() map[classify.Verdict]int {
	sum := map[classify.Verdict]int{}
	for _, r := range rep.Results {
		sum[r.Verdict]++
	}
	return sum
}

// Predicted counts the cells --prune did not start.
func (rep *Report) Predicted() int {
	n := 0
	for _, r := range rep.Results {
		if r.Verdict == classify.Predicted {
			n++
		}
	}
	return n
}

// DropSteps drops the logprob steps of every result (Result.DropSteps).
func (rep *Report) DropSteps() {
	for i := range rep.Results {
		rep.Results[i].DropSteps()
	}
}
