package across

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// History is each cell of many runs of one config on one host over time:
// the runs in the order they started, and per cell one point per run.
type History struct {
	// Config names the config (and, for a bisect, its cell and mode:
	// configName), Host the host (hostKey); Title says both.
	Config string        `json:"config"`
	Host   string        `json:"host"`
	Title  string        `json:"title"`
	Runs   []HistoryRun  `json:"runs"`
	Cells  []CellHistory `json:"cells"`
	// sums are the runs' summaries, in the order of Runs.
	sums []*record.Summary
}

// HistoryRun is one run of a history: where it is, when it started, on what.
type HistoryRun struct {
	Dir       string            `json:"dir"`
	Name      string            `json:"name"`
	Started   time.Time         `json:"started"`
	Hostname  string            `json:"hostname"`
	GPU       string            `json:"gpu,omitempty"`
	Driver    string            `json:"driver,omitempty"`
	CUDA      string            `json:"cuda,omitempty"`
	Versions  map[string]string `json:"versions,omitempty"`
	Simulated bool              `json:"simulated,omitempty"`
	// Yardstick names the earlier run's yardstick the run's cells were
	// judged against, its own cells having chosen none ("" otherwise).
	Yardstick string `json:"yardstick,omitempty"`
	// Judged says its cells were judged by an older classifier and
	// re-judged with this bmx's (record.Judged.Sentence; "" when current).
	Judged string `json:"judged,omitempty"`
	// Aborted says why the run stopped before its cells had all run
	// (record.Run.Aborted): what it did not finish is not counted.
	Aborted string `json:"aborted,omitempty"`
}

// CellHistory is one cell over the runs.
type CellHistory struct {
	Cell string `json:"cell"`
	// Points has one entry per run, in run order; Verdict "none" where the
	// run did not have the cell.
	Points []Point `json:"points"`
	// Strip is the verdicts as the HTML report's glyphs, one per run.
	Strip  string           `json:"strip"`
	Latest classify.Verdict `json:"latest"`
	// Changes counts the verdict changes between consecutive runs that
	// had the cell; Flaky is a cell that went back to a verdict it had
	// left (flipping back and forth), or was judged flaky in a run.
	Changes int  `json:"changes"`
	Flaky   bool `json:"flaky"`
	// LastChange is the latest verdict change (nil: none).
	LastChange *Change `json:"last_change,omitempty"`
	// PerfShift is the latest change of speed between consecutive runs
	// that measured the cell, by the perf gate's rule (nil: none).
	PerfShift *PerfShift `json:"perf_shift,omitempty"`
}

// Point is a cell in one run.
type Point struct {
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	// TokensPerS and TTFTMS are the spreads at concurrency 1 (nil: not
	// measured).
	TokensPerS *evidence.Spread `json:"tokens_per_s,omitempty"`
	TTFTMS     *evidence.Spread `json:"ttft_ms,omitempty"`
	// YardstickLost marks a correct verdict after one that failed only
	// against the earlier run's yardstick, in a run with no yardstick to
	// judge it by (reports.YardstickLost): no fix, and not shown as one.
	YardstickLost bool `json:"yardstick_lost,omitempty"`
	// Unfinished marks the cell that stopped its run on a broken setup
	// (record.Run.Counts): its crash is the setup's, not a verdict, and it
	// is drawn and counted as a run without the cell.
	Unfinished bool `json:"unfinished,omitempty"`
}

// mark is what a view draws for the point: its verdict, or
// reports.YardstickLost for a correct verdict nothing judged.
func (p Point) mark() string {
	if p.YardstickLost {
		return reports.YardstickLost
	}
	return string(p.Verdict)
}

// Change is a verdict change between two runs: the run it was first seen
// in, and what in the host's fingerprint changed with it.
type Change struct {
	Run         int              `json:"run"`
	From        classify.Verdict `json:"from"`
	To          classify.Verdict `json:"to"`
	Signature   string           `json:"signature,omitempty"`
	Fingerprint []string         `json:"fingerprint,omitempty"`
	// YardstickLost marks a change to correct that is no fix: see
	// Point.YardstickLost.
	YardstickLost bool `json:"yardstick_lost,omitempty"`
}

// PerfShift is a change of speed between two runs.
type PerfShift struct {
	Run         int      `json:"run"`
	Kind        string   `json:"kind"`
	Metric      string   `json:"metric"`
	Concurrency int      `json:"concurrency"`
	From        float64  `json:"from"`
	To          float64  `json:"to"`
	Change      float64  `json:"change"`
	Fingerprint []string `json:"fingerprint,omitempty"`
}

// Histories groups the runs by config and host (hostKey), as publish does,
// and follows each group apart (NewHistory): runs of two configs, or of
// one config on two hosts, are never one history. Groups are in the order
// of their config, then host.
func Histories(dirs []string, reps []*record.Report) []*History {
	hs, _ := HistoriesOf(summariesOf(dirs, reps)) // no error: nothing is read
	return hs
}

// HistoriesOf is Histories of the runs' summaries (record.LoadSummary):
// the same histories, read from bytes per cell. The error is one of
// reading a run again (record.JudgeAcross).
func HistoriesOf(sums []*record.Summary) ([]*History, error) {
	groups := map[[2]string][]*record.Summary{}
	for _, s := range sums {
		k := [2]string{configName(s.Dir, s.Run), hostKey(s.Run)}
		groups[k] = append(groups[k], s)
	}
	var hs []*History
	for _, k := range slices.SortedFunc(maps.Keys(groups), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		h, err := HistoryOf(groups[k])
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// summariesOf are the reports as summaries (record.SummaryOf), each first
// judged with this bmx's classifier (record.Report.JudgeCurrent).
func summariesOf(dirs []string, reps []*record.Report) []*record.Summary {
	sums := make([]*record.Summary, len(reps))
	for i, rep := range reps {
		j := rep.JudgeCurrent(true)
		sums[i] = record.SummaryOf(rep, j)
		sums[i].Dir = dirs[i]
	}
	return sums
}

// NewHistory orders the runs (of one config on one host: Histories) by
// start and follows each cell through them; cells are in the order of the
// latest run that has them (its axes'), then the cells only older runs
// had. Cells an older classifier judged are judged again with this bmx's
// (record.Report.JudgeCurrent), so a change of classifier never reads as a
// change of backend; the run says so. A run whose own cells chose no
// yardstick is judged, in place, against the verified yardstick of the
// latest earlier run that lends one (record.JudgeAcross). What an aborted
// run did not finish is no verdict (record.Run.Counts).
func NewHistory(dirs []string, reps []*record.Report) *History {
	h, _ := HistoryOf(summariesOf(dirs, reps)) // no error: nothing is read
	return h
}

// HistoryOf is NewHistory of the runs' summaries (record.LoadSummary).
func HistoryOf(sums []*record.Summary) (*History, error) {
	ordered := slices.Clone(sums)
	slices.SortStableFunc(ordered, func(a, b *record.Summary) int {
		return cmp.Or(a.Run.Started.Compare(b.Run.Started), cmp.Compare(a.Dir, b.Dir))
	})
	if err := record.JudgeAcross(ordered); err != nil {
		return nil, err
	}
	h := &History{Runs: []HistoryRun{}, Cells: []CellHistory{}, sums: ordered}
	for _, s := range ordered {
		r := s.Run
		h.Runs = append(h.Runs, HistoryRun{Dir: s.Dir, Name: r.Name, Started: r.Started, Hostname: r.Host.Hostname,
			GPU: r.Host.GPU, Driver: r.Host.Driver, CUDA: r.Host.CUDA, Versions: r.Host.Versions, Simulated: r.Simulated,
			Judged: s.JudgedNote, Aborted: r.Aborted(), Yardstick: s.Baseline})
	}
	if n := len(ordered); n > 0 {
		last := ordered[n-1]
		h.Config, h.Host = configName(last.Dir, last.Run), hostKey(last.Run)
		h.Title = h.Config + " on " + h.Host
	}
	var ids []string
	seen := map[string]bool{}
	for _, s := range slices.Backward(ordered) {
		for i := range s.Cells {
			if id := s.Cells[i].Cell.ID; !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		h.Cells = append(h.Cells, h.cell(id, ordered))
	}
	return h, nil
}

// cell follows one cell through the ordered runs.
func (h *History) cell(id string, sums []*record.Summary) CellHistory {
	c := CellHistory{Cell: id, Points: []Point{}, Latest: "none"}
	var strip strings.Builder
	var results []*record.CellSummary // nil where the run lacks the cell
	for _, s := range sums {
		var r *record.CellSummary
		if i := s.Index(id); i >= 0 {
			r = &s.Cells[i]
		}
		p := Point{Verdict: "none"}
		if r != nil && !r.Counts {
			r, p.Unfinished = nil, true
		}
		results = append(results, r)
		if r != nil {
			p.Verdict, p.Signature = r.Verdict, r.Signature
			if l := r.Speed; l != nil && (r.Verdict == classify.Correct || r.Verdict == classify.Degraded) && l.Requests > 0 {
				tps, ttft := l.TokensPerSecond, l.TTFTMS
				p.TokensPerS, p.TTFTMS = &tps, &ttft
			}
			c.Latest = r.Verdict
			c.Flaky = c.Flaky || r.Verdict == classify.Flaky
		}
		c.Points = append(c.Points, p)
	}
	c.changes(h, results, sums)
	for _, p := range c.Points {
		strip.WriteString(reports.VerdictGlyph(p.mark()))
	}
	c.Strip = strip.String()
	c.perf(h, results)
	return c
}

// lostYardstick is reports.LostYardstick of a summary's cells: r of the
// run s, after b of the run before.
func lostYardstick(s *record.Summary, b, r *record.CellSummary) bool {
	if b.Verdict != classify.Degraded && b.Verdict != classify.Wrong {
		return false
	}
	own := r.Verdict
	if r.Alone != "" {
		own = r.Alone
	}
	if own != classify.Correct || s.OwnLost == "" {
		return false
	}
	if s.Baseline != "" && r.Verdict == classify.Correct {
		return false // correct against the base's yardstick too: a fix
	}
	return b.AloneCorrect
}

// perfResult is the cell as reports.PerfChangesOf reads it: its verdict
// and its speed at concurrency 1.
func perfResult(c *record.CellSummary) record.Result {
	r := record.Result{Cell: matrix.Cell{ID: c.Cell.ID}, Verdict: c.Verdict}
	if c.Perf {
		r.Perf = &evidence.Perf{}
		if c.Speed != nil {
			r.Perf.Levels = []evidence.PerfLevel{*c.Speed}
		}
	}
	return r
}

// changes counts the verdict changes, finds the latest, names the cell
// flaky when it went back to a verdict it had left, and marks a change to
// correct that no yardstick judged (reports.YardstickLost).
func (c *CellHistory) changes(h *History, results []*record.CellSummary, sums []*record.Summary) {
	prev := -1
	var left []classify.Verdict
	for i, r := range results {
		if r == nil {
			continue
		}
		if prev >= 0 && results[prev].Verdict != r.Verdict {
			c.Changes++
			left = append(left, results[prev].Verdict)
			if slices.Contains(left, r.Verdict) {
				c.Flaky = true
			}
			lost := lostYardstick(sums[i], results[prev], r)
			c.Points[i].YardstickLost = lost
			c.LastChange = &Change{Run: i, From: results[prev].Verdict, To: r.Verdict, Signature: r.Signature,
				Fingerprint: h.fingerprintChanges(prev, i), YardstickLost: lost}
		}
		prev = i
	}
}

// perf finds the latest change of speed between consecutive runs that
// measured the cell, and that is a change of level, not one run's noise: a
// run slowed by a busy host (one spike) reads as a regression into it and
// an improvement out of it. So a change from run p to run i counts only
// where the run before p, if any, differs from i the same way (i is not
// back at the level p left), and i's level holds in the run after it, if
// any (p differs from it the same way).
func (c *CellHistory) perf(h *History, results []*record.CellSummary) {
	var measured []int
	for i := range results {
		if c.Points[i].TokensPerS != nil {
			measured = append(measured, i)
		}
	}
	for k := 1; k < len(measured); k++ {
		p, i := measured[k-1], measured[k]
		for _, ch := range reports.PerfChangesOf(perfResult(results[p]), perfResult(results[i])) {
			if ch.Concurrency != 1 {
				continue
			}
			if k >= 2 && !changesAlike(ch, perfResult(results[measured[k-2]]), perfResult(results[i])) {
				continue // i is back where it was before p: p was a spike
			}
			if k+1 < len(measured) && !changesAlike(ch, perfResult(results[p]), perfResult(results[measured[k+1]])) {
				continue // the next run is back where p was: i is a spike
			}
			c.PerfShift = &PerfShift{Run: i, Kind: ch.Kind, Metric: ch.Metric, Concurrency: ch.Concurrency,
				From: ch.Base.Median, To: ch.New.Median, Change: ch.Change, Fingerprint: h.fingerprintChanges(p, i)}
			break
		}
	}
}

// changesAlike reports whether run b differs from run a as ch says: the
// same kind of change of the same metric at the same concurrency.
func changesAlike(ch reports.PerfChange, a, b record.Result) bool {
	for _, o := range reports.PerfChangesOf(a, b) {
		if o.Kind == ch.Kind && o.Metric == ch.Metric && o.Concurrency == ch.Concurrency {
			return true
		}
	}
	return false
}

// fingerprintChanges are the host fingerprint's differences from run a to
// run b: "sglang 0.5.5 -> 0.5.6", "driver 570.1 -> 580.2".
func (h *History) fingerprintChanges(a, b int) []string {
	ra, rb := h.Runs[a], h.Runs[b]
	var out []string
	add := func(name, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %s -> %s", name, orNone(x), orNone(y)))
		}
	}
	add("host", ra.Hostname, rb.Hostname)
	add("GPU", ra.GPU, rb.GPU)
	add("driver", ra.Driver, rb.Driver)
	add("CUDA", ra.CUDA, rb.CUDA)
	keys := slices.Sorted(maps.Keys(ra.Versions))
	for k := range rb.Versions {
		if _, ok := ra.Versions[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		add(k, ra.Versions[k], rb.Versions[k])
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// RunLabel names run i for a reader: its directory's base name.
func (h *History) RunLabel(i int) string { return filepath.Base(h.Runs[i].Dir) }

// changeText says a cell's latest verdict change in words: "correct ->
// crash in run 7 (20260310T...), with sglang 0.5.6 -> 0.5.7".
func (h *History) changeText(c CellHistory) string {
	ch := c.LastChange
	if ch == nil {
		return "never changed"
	}
	s := fmt.Sprintf("%s -> %s in run %d (%s)", ch.From, ch.To, ch.Run+1, h.RunLabel(ch.Run))
	if ch.YardstickLost {
		s += ", yardstick lost: that run had no yardstick to judge it by, so nothing shows it fixed"
	}
	if len(ch.Fingerprint) > 0 {
		s += ", with " + strings.Join(ch.Fingerprint, ", ")
	}
	return s
}

// perfText says a cell's speed over the runs: the first and latest tok/s
// per request (latest with its spread), TTFT, and the latest shift.
func (h *History) perfText(c CellHistory) string {
	var first, last *Point
	for i := range c.Points {
		if c.Points[i].TokensPerS != nil {
			if first == nil {
				first = &c.Points[i]
			}
			last = &c.Points[i]
		}
	}
	if last == nil {
		return "not measured"
	}
	s := fmt.Sprintf("%s -> %s tok/s (%s-%s), TTFT %s ms", num(first.TokensPerS.Median), num(last.TokensPerS.Median),
		num(last.TokensPerS.Min), num(last.TokensPerS.Max), num(last.TTFTMS.Median))
	if p := c.PerfShift; p != nil {
		s += fmt.Sprintf("; %s in run %d: %s %s -> %s (%+.0f%%)", p.Kind, p.Run+1, p.Metric, num(p.From), num(p.To), p.Change*100)
		if len(p.Fingerprint) > 0 {
			s += ", with " + strings.Join(p.Fingerprint, ", ")
		}
	}
	return s
}

// note is a cell's remark: flaky, or a speed shift.
func (c CellHistory) note() string {
	var n []string
	if c.Flaky {
		n = append(n, fmt.Sprintf("FLAKY (%d changes)", c.Changes))
	}
	if c.PerfShift != nil {
		n = append(n, c.PerfShift.Kind)
	}
	if len(c.Points) > 0 && c.Points[len(c.Points)-1].YardstickLost {
		n = append(n, "latest correct unjudged: yardstick lost, not a fix")
	}
	return strings.Join(n, "; ")
}

func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
