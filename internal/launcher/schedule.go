package launcher

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// queue is a sweep's scheduler: it hands out the cells in their order, each
// as a step, either "run this cell" or a result already decided without a
// server (the twin of an auto cell under dedupe, a prediction of --prune).
// What decides a cell is what the cells before it showed, so a step is
// asked for only once a slot is free: every cell that ended before counts.
//
// The head of the queue is the cells up to the first that needs a server,
// when that cell must run alone (the reference, or the setup check): a
// resumed sweep's first cells left may be decided, and the first that needs
// a server still runs alone.
type queue struct {
	cfg         *matrix.Config
	secrets     *matrix.Secrets
	self        string
	cells       cellList
	at          int // the next cell's position in cells
	refID       string
	stopOnSetup bool
	prune       *pruner // nil: --prune is off
	twins       *twins  // nil: dedupe is off
	// head is true while the cells handed out are in the head.
	head bool
	// ref is the reference cell's answers, once known: every cell judged
	// after it is compared with them.
	ref *classify.Reference
}

// step is what to do with one cell.
type step struct {
	cell matrix.Cell
	// decided is the cell's result when it needs no server.
	decided *record.Result
	// alone runs the cell before any other starts; its result gives the
	// reference's answers, or shows a broken setup.
	alone bool
}

// newQueue is the scheduler of s for cells, in the order given, with s's
// Evidence already taken into account. Each cell is built when it is handed
// out.
func (s *Sweep) newQueue(cells cellList) *queue {
	q := &queue{cfg: s.Config, secrets: s.secrets(), self: s.Self, cells: cells, refID: s.Reference, stopOnSetup: s.StopOnSetup}
	if s.PruneAfter > 0 {
		q.prune = newPruner(s.PruneAfter, s.Config)
	}
	if s.Dedupe {
		q.twins = newTwins(s.Config, cells)
	}
	for _, r := range s.Evidence {
		q.ran(r)
		q.answers(r)
	}
	q.head = cells.len() > 0 && (q.refID != "" && cells.id(0) == q.refID || s.StopOnSetup)
	return q
}

func (q *queue) isReference(cell matrix.Cell) bool {
	return q.refID != "" && cell.ID == q.refID
}

// next hands out the next cell; false once every cell was handed out.
func (q *queue) next() (step, bool) {
	if q.at == q.cells.len() {
		return step{}, false
	}
	cell := q.cells.cell(q.at)
	q.at++
	if r := q.decide(cell); r != nil {
		if q.head {
			q.answers(*r)
		}
		return step{cell: cell, decided: r}, true
	}
	st := step{cell: cell, alone: q.head && (q.isReference(cell) || q.stopOnSetup)}
	q.head = false
	return st, true
}

// decide is the result of a cell that needs no server: an auto cell that
// ran resolved to it, or earlier failures predict it; nil when it needs one.
func (q *queue) decide(cell matrix.Cell) *record.Result {
	if src, ok := q.twins.source(cell); ok {
		r := q.inherited(cell, src)
		return &r
	}
	if pred := q.prune.predict(cell); pred != nil {
		r := predicted(q.secrets, cell, pred)
		return &r
	}
	return nil
}

// ran takes the result of a cell that ran (in this sweep or an earlier
// attempt of it) as evidence for the cells after it: for pruning and for
// dedupe. It may be called concurrently.
func (q *queue) ran(r record.Result) {
	q.prune.add(r)
	q.twins.add(r)
}

// answers takes the reference cell's answers from its result, if r is the
// reference's: it is the one place they are found, from an earlier
// attempt's result, a decided one, or the reference that ran alone.
func (q *queue) answers(r record.Result) {
	if q.isReference(r.Cell) {
		q.ref = r.AsReference()
	}
}

// inherited is the result of a cell that is not started because the auto
// cell of src resolved to its very server: src's evidence and verdict,
// marked as inherited, with the cell's own command line (for a repro) and no
// timings or performance of its own.
func (q *queue) inherited(cell matrix.Cell, src record.Result) record.Result {
	r := src
	r.Cell = q.secrets.Cell(cell)
	r.InheritedFrom = src.Cell.ID
	argv, env := q.cfg.Command(cell, matrix.Runtime{Self: q.self, Port: src.Port, GPUs: src.Slot})
	r.Argv, r.Env = q.secrets.Argv(argv), q.secrets.Env(env)
	r.Repro = Repro(workDir(), r.Env, r.Argv)
	r.Perf, r.Timings = nil, record.Timings{}
	now := time.Now().UTC()
	r.Started, r.Ended = now, now
	r.Judge(q.ref)
	return r
}

// predicted is the record of a cell --prune did not start.
func predicted(secrets *matrix.Secrets, cell matrix.Cell, pred *record.Prediction) record.Result {
	now := time.Now().UTC()
	return record.Result{
		Cell: secrets.Cell(cell), Verdict: classify.Predicted, Prediction: pred, Reason: pred.Text(),
		Observations: []evidence.Observation{}, Probes: []classify.ProbeVerdict{}, Started: now, Ended: now,
	}
}

// pass is one Run of a sweep: its slots, free or taken, the cells in flight
// and the results kept so far.
type pass struct {
	s     *Sweep
	slots []matrix.Slot
	free  chan int
	g     errgroup.Group
	// setup, when a setup check runs, is closed once it has passed (its
	// server answered, or it ended showing no broken setup) or failed (then
	// the cells' context has ended first). The cells that started beside
	// it keep their results back until then (see runAlone).
	setup chan struct{}

	mu      sync.Mutex
	results []record.Result
	// started says a cell of this pass got past its server's start (or
	// ended otherwise than crashing before it): the setup works. Until
	// then, crashed are the cells run, all crashed at start.
	started bool
	crashed []record.Result
}

func newPass(s *Sweep) *pass {
	p := &pass{s: s, slots: s.Slots}
	if len(p.slots) == 0 {
		p.slots = []matrix.Slot{{}}
	}
	p.free = make(chan int, len(p.slots))
	for i := range p.slots {
		p.free <- i
	}
	p.g.SetLimit(len(p.slots))
	// A resumed run whose earlier cells got their servers ready has a
	// setup that works.
	p.started = slices.ContainsFunc(s.Evidence, func(r record.Result) bool { return r.Timings.ReadyMS > 0 || len(r.Observations) > 0 })
	return p
}

// loop hands out the queue's steps on free slots until it is empty or ctx
// ends. The reference, which runs alone, is waited for; the setup check
// and the others run concurrently (see runAlone). The error is an
// infrastructure failure (after which stop has ended the cells in flight)
// or the *SetupError of the reference; a setup check's comes from p.g.
func (p *pass) loop(ctx context.Context, stop context.CancelCauseFunc) error {
	for {
		slot, ok := p.take(ctx)
		if !ok {
			return nil
		}
		st, ok := p.s.q.next()
		switch {
		case !ok:
			p.free <- slot
			return nil
		case st.decided != nil:
			if !p.setupPassed(ctx) {
				p.free <- slot
				return nil
			}
			if err := p.decided(slot, *st.decided); err != nil {
				stop(err)
				return err
			}
		case st.alone:
			if err := p.runAlone(ctx, stop, slot, st); err != nil {
				return err
			}
		default:
			hold := p.setup
			p.g.Go(func() error { return p.run(ctx, stop, slot, st, nil, hold) })
		}
	}
}

// runAlone runs a cell that must come first. The reference is waited for
// to its end: every other cell is judged against its answers.
//
// The setup check (StopOnSetup's first cell) does not hold the other slots:
// their cells start beside it, and keep their results back until it has
// passed, which is as soon as its server is ready and has answered its
// first probe (a broken setup is a crash before the server was ready, see
// setupFailure, so from then on the cell can no longer show one). If it
// fails, the cells beside it are torn down and not recorded, as on an
// interrupt: a resume runs them. So no GPU waits on the setup check; a
// broken setup costs one server start per slot instead of one, at the same
// time, each torn down as soon as the check fails.
func (p *pass) runAlone(ctx context.Context, stop context.CancelCauseFunc, slot int, st step) error {
	if p.s.q.isReference(st.cell) {
		return p.run(ctx, stop, slot, st, nil, nil)
	}
	gate := make(chan struct{})
	var once sync.Once
	passed := func() { once.Do(func() { close(gate) }) }
	p.setup = gate
	p.g.Go(func() error {
		defer passed() // after stop, when it failed
		return p.run(ctx, stop, slot, st, passed, nil)
	})
	return nil
}

// setupPassed waits until the setup check, if one runs, has passed; false
// when it failed or ctx ended first.
func (p *pass) setupPassed(ctx context.Context) bool {
	if p.setup != nil {
		select {
		case <-p.setup:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// take waits for a free slot; false when ctx ended first (or as well: no
// cell starts after an interrupt or a failure).
func (p *pass) take(ctx context.Context) (int, bool) {
	select {
	case <-ctx.Done():
		return 0, false
	case slot := <-p.free:
		if ctx.Err() != nil {
			p.free <- slot
			return 0, false
		}
		return slot, true
	}
}

// decided records a result decided without a server on slot and frees it.
func (p *pass) decided(slot int, r record.Result) error {
	r, err := p.s.keep(slot, r)
	p.free <- slot
	if err != nil {
		return err
	}
	p.add(r)
	return nil
}

// run runs a cell on slot and keeps its result; the slot is free again once
// the result counts as evidence. The error is an infrastructure failure,
// which stops the cells' context, or, for a cell that ran alone with
// StopOnSetup, the *SetupError of a broken setup, which stops the cells'
// context too before the slot is free. release, if set, is called once the
// cell's server is ready and has answered its first probe; a cell past that
// point shows no broken setup. hold, if set, is closed when a setup check
// has passed or failed: the result waits for it.
func (p *pass) run(ctx context.Context, stop context.CancelCauseFunc, slot int, st step, release func(), hold <-chan struct{}) error {
	defer func() { p.free <- slot }()
	var answered func()
	var works atomic.Bool
	if release != nil {
		answered = func() {
			works.Store(true)
			release()
		}
	}
	r, err := p.s.record(ctx, slot, p.slots[slot].GPUs, st.cell, answered, hold)
	if err != nil {
		stop(err)
		return err
	}
	if r == nil { // cut short by ctx
		return nil
	}
	p.add(*r)
	if err := p.sameStart(*r); err != nil {
		stop(err) // before the slot is free: no cell starts after it
		return err
	}
	p.s.q.ran(*r)
	if !st.alone {
		return nil
	}
	p.s.q.answers(*r)
	if !p.s.StopOnSetup || works.Load() {
		return nil
	}
	if err := setupFailure(*r, p.s.q.isReference(st.cell)); err != nil {
		stop(err) // before the slot is free: no cell starts after it
		return err
	}
	return nil
}

func (p *pass) add(r record.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results = append(p.results, r)
}

// sameStart, with StopOnSetup, is the *SetupError of the cells run so far
// when they all crashed the same way at start (see sameStart) while no
// cell's server has been ready yet.
func (p *pass) sameStart(r record.Result) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.s.StopOnSetup || p.started {
		return nil
	}
	if r.Verdict != classify.Crash || r.Timings.ReadyMS > 0 || len(r.Observations) > 0 {
		p.started = true
		return nil
	}
	p.crashed = append(p.crashed, r)
	return sameStart(p.crashed)
}
