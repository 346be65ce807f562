package bisect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// search checks the ends and halves the range between the last good and
// the first bad value until no untried value is left between them. Steps
// whose result is recorded are read (a resume), the others run.
func (b *bisector) search(ctx context.Context) error {
	n := len(b.opts.Values)
	goodStep, good, err := b.step(ctx, 0, nil)
	if err != nil {
		return err
	}
	if goodStep.Side == record.SideSkip {
		return &EndError{Value: b.label(0), Why: goodStep.Why}
	}
	badStep, _, err := b.step(ctx, n-1, &good)
	if err != nil {
		return err
	}
	switch badStep.Side {
	case record.SideSkip:
		return &EndError{Value: b.label(n - 1), Why: badStep.Why}
	case record.SideGood:
		return fmt.Errorf("%w: %s and %s are alike (%s): nothing to bisect", ErrNoChange, b.label(0), b.label(n-1), badStep.Why)
	}
	lo, hi := 0, n-1
	var skipped []int
	for {
		m, ok := pick(lo, hi, skipped)
		if !ok {
			break
		}
		s, _, err := b.step(ctx, m, &good)
		if err != nil {
			return err
		}
		switch s.Side {
		case record.SideGood:
			lo = m
		case record.SideBad:
			hi = m
		default:
			skipped = append(skipped, m)
		}
	}
	b.rec.Finding = b.finding(lo, hi, skipped)
	b.rec.Done = true
	return nil
}

// pick is the untried value between lo and hi nearest their middle (the
// lower of two as near), as git bisect skip moves off a skipped commit;
// false when none is left.
func pick(lo, hi int, skipped []int) (int, bool) {
	mid := (lo + hi) / 2
	for d := 0; d < hi-lo; d++ {
		for _, m := range []int{mid - d, mid + d + 1} {
			if m > lo && m < hi && !slices.Contains(skipped, m) {
				return m, true
			}
		}
	}
	return 0, false
}

// label is the value at i as the var's assignment, as bmx writes it:
// "sim_version=6", "api_token=<secret #2>".
func (b *bisector) label(i int) string { return b.opts.Along + "=" + b.shown[i] }

// step runs the cell at value i (reads its recorded result on a resume)
// and judges it against good (nil: it is the good end). An undecidable
// result is run once more; twice undecidable is a skip.
func (b *bisector) step(ctx context.Context, i int, good *record.Result) (record.BisectStep, record.Result, error) {
	var first *record.Result
	for attempt := 1; ; attempt++ {
		r, err := b.result(ctx, i, attempt, first)
		if err != nil {
			return record.BisectStep{}, record.Result{}, err
		}
		s := b.judge(i, attempt, r, good)
		if s.Side == record.SideSkip && attempt == 1 {
			s.Side = record.SideRetry
		}
		b.rec.Steps = append(b.rec.Steps, s)
		b.opts.Log.Printf("%s: %s (%s): %s", b.label(i), r.Verdict, s.Side, s.Why)
		if err := record.WriteBisect(b.dir, b.rec); err != nil {
			return record.BisectStep{}, record.Result{}, fmt.Errorf("write %s: %w", record.BisectFile, err)
		}
		if s.Side != record.SideRetry {
			return s, r, nil
		}
		first = &r
	}
}

// result is the cell's result at value i: its recorded one (a resume), or
// a new run, appended to results.jsonl. A run cut short by ctx is not
// recorded: its verdict would describe bmx, not the value.
func (b *bisector) result(ctx context.Context, i, attempt int, first *record.Result) (record.Result, error) {
	id := b.base.ID + "," + b.label(i)
	if k := b.used[id]; k < len(b.prior[id]) {
		b.used[id]++
		b.rec.Runs++
		r := b.prior[id][k]
		b.results = append(b.results, r)
		return r, nil
	}
	if ctx.Err() != nil {
		return record.Result{}, ErrInterrupted
	}
	cfg, cell, err := b.load(i)
	if err != nil {
		return record.Result{}, err
	}
	cell.ID = id
	cell.Values = append(slices.Clone(cell.Values), matrix.AxisValue{Axis: b.opts.Along, Value: b.shown[i]})
	probes, err := launcher.ProbeSet(cfg)
	if err != nil {
		return record.Result{}, &UsageError{err}
	}
	sw := &launcher.Sweep{Config: cfg, Probes: probes, Self: b.opts.Self, Dir: b.dir, Store: b.store}
	b.opts.Log.Printf("running %s (attempt %d)", id, attempt)
	run := b.opts.runCell
	if run == nil {
		run = func(ctx context.Context, sw *launcher.Sweep, cell matrix.Cell, attempt int) (record.Result, error) {
			return sw.RunCell(ctx, "", cell, attempt)
		}
	}
	r, err := run(ctx, sw, cell, attempt)
	if err != nil {
		return record.Result{}, err
	}
	if ctx.Err() != nil {
		return record.Result{}, ErrInterrupted
	}
	if first != nil {
		r.Attempts = append(r.Attempts, record.Attempt{Verdict: first.Verdict, Signature: first.Signature, Reason: first.Reason, LogPath: first.LogPath})
	}
	if err := b.store.Append(r); err != nil {
		return record.Result{}, fmt.Errorf("record %s: %w", id, err)
	}
	b.rec.Runs++
	b.results = append(b.results, r)
	return r, nil
}

// judge is a step's side: good or bad against the good end (good nil: r is
// the good end), skip when r cannot decide it.
func (b *bisector) judge(i, attempt int, r record.Result, good *record.Result) record.BisectStep {
	s := record.BisectStep{Value: b.shown[i], Index: i, Attempt: attempt, Cell: r.Cell.ID,
		Verdict: r.Verdict, Signature: r.Signature, TokensPerS: tokensPerS(r)}
	if why := b.undecidable(r); why != "" {
		s.Side, s.Why = record.SideSkip, why
		return s
	}
	switch {
	case good == nil:
		s.Side, s.Why = record.SideGood, "the good end: "+outcome(r)
	case b.opts.Perf:
		if why, dropped := b.opts.PerfDrop(*good, r); dropped {
			s.Side, s.Why = record.SideBad, why
		} else {
			s.Side, s.Why = record.SideGood, fmt.Sprintf("%s tok/s per request, no drop from %s", num(s.TokensPerS), num(tokensPerS(*good)))
		}
	case r.Verdict != good.Verdict || r.Signature != good.Signature:
		s.Side, s.Why = record.SideBad, outcome(r)+", not "+outcome(*good)
	default:
		s.Side, s.Why = record.SideGood, outcome(r)+", as the good end"
	}
	return s
}

// undecidable says why r cannot place its value on either side ("" when
// it can): the harness could not judge it, it flipped between attempts,
// the environment did not start, or (perf) nothing was measured.
func (b *bisector) undecidable(r record.Result) string {
	switch r.Verdict {
	case classify.Inconclusive:
		return "inconclusive: " + r.Reason
	case classify.Flaky:
		return "flaky: " + r.Reason
	}
	if r.Verdict == classify.Crash {
		in := r.Input()
		if cause, line := classify.Setup(in, r.Argv, r.Cell.Args); cause != "" {
			return fmt.Sprintf("the environment did not start: %s (%s)", cause, line)
		}
	}
	if b.opts.Perf && tokensPerS(r) == 0 {
		return "no performance figure: " + outcome(r)
	}
	return ""
}

// outcome is a result's verdict with its signature: "crash (CUDA error: ...)".
func outcome(r record.Result) string {
	if r.Signature != "" {
		return fmt.Sprintf("%s (%s)", r.Verdict, r.Signature)
	}
	return string(r.Verdict)
}

// tokensPerS is r's median output rate per request at concurrency 1, when
// it was measured (a correct or degraded cell); 0 otherwise.
func tokensPerS(r record.Result) float64 {
	if r.Perf == nil || (r.Verdict != classify.Correct && r.Verdict != classify.Degraded) {
		return 0
	}
	if l := r.Perf.Level(1); l != nil {
		return l.TokensPerSecond.Median
	}
	return 0
}

func num(x float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", x), "0"), ".")
}

// finding says where the search ended.
func (b *bisector) finding(lo, hi int, skipped []int) *record.BisectFinding {
	f := &record.BisectFinding{LastGood: b.shown[lo], FirstBad: b.shown[hi]}
	for _, k := range slices.Sorted(slices.Values(skipped)) {
		f.Skipped = append(f.Skipped, b.shown[k])
	}
	if hi-lo > 1 {
		f.Candidates = slices.Clone(b.shown[lo+1 : hi+1])
	}
	bad, good := b.lastStep(hi), b.lastStep(lo)
	var what, was string
	if b.opts.Perf {
		what = bad.Why
		was = fmt.Sprintf("at %s tok/s per request", num(good.TokensPerS))
	} else {
		what, was = outcome(b.resultOf(bad)), string(good.Verdict)
	}
	from := b.shown[hi]
	if len(f.Candidates) > 0 {
		from = "one of " + strings.Join(f.Candidates, ", ") + " (skipped: " + strings.Join(f.Skipped, ", ") + ")"
	}
	f.Text = fmt.Sprintf("%s from %s on; %s %s", what, from, b.shown[lo], was)
	return f
}

// lastStep is the latest step taken at value i.
func (b *bisector) lastStep(i int) record.BisectStep {
	for _, s := range slices.Backward(b.rec.Steps) {
		if s.Index == i {
			return s
		}
	}
	return record.BisectStep{}
}

// resultOf is the result a step judged.
func (b *bisector) resultOf(s record.BisectStep) record.Result {
	for _, r := range slices.Backward(b.results) {
		if r.Cell.ID == s.Cell {
			return r
		}
	}
	return record.Result{Verdict: s.Verdict, Signature: s.Signature}
}

// finish writes bisect.json, run.json and the reports, and says how the
// bisect ended.
func (b *bisector) finish(searchErr error) (*Outcome, error) {
	b.run.Ended = time.Now().UTC()
	b.run.Interrupted = errors.Is(searchErr, ErrInterrupted)
	if b.resumed {
		b.run.Resumed++
	}
	rep := record.NewReport(b.run, b.allResults())
	out := &Outcome{Dir: b.dir, Bisect: b.rec, Report: rep, Resumed: b.resumed}
	err := record.WriteBisect(b.dir, b.rec)
	if err == nil {
		err = record.WriteRun(b.dir, b.run)
	}
	if err == nil && b.opts.WriteReports != nil {
		err = b.opts.WriteReports(b.dir, rep)
	}
	if searchErr != nil {
		return out, searchErr
	}
	return out, err
}

// allResults are the recorded results, those of steps this search did not
// reach included (a resume of a bisect asked differently never happens:
// the options come from bisect.json).
func (b *bisector) allResults() []record.Result {
	out := slices.Clone(b.results)
	for id, rs := range b.prior {
		out = append(out, rs[b.used[id]:]...)
	}
	return out
}
