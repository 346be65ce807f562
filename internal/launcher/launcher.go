// Package launcher owns a run of a sweep from start to end: Session loads
// and checks the matrix, opens the run directory and has the reports
// written; Sweep runs the cells on GPU slots concurrently, in the order
// OrderCells gives, through a scheduler (queue) that hands out each cell as
// "run it" or "already decided" (the twin of an auto cell under dedupe, a
// prediction of --prune); and RunCell is one cell's attempt, which reads as
// its sequence: start the server, wait for it to be ready, observe it (the
// probes, the performance probe, the record of the server as it stands),
// tear it down, judge it.
//
// One server's life (its process tree under a supervisor, log watching,
// readiness, ports, teardown, GPU wait, forensics) is package server's. The
// launcher records what happened and hands the record to the classifier; it
// never judges text itself. A failed cell is data: only infrastructure
// errors (the run directory cannot be written) stop a sweep.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Recorder keeps each finished cell's result (*record.Store, the run's
// results.jsonl). An error from it is an infrastructure failure: it stops the
// sweep.
type Recorder interface {
	Append(r record.Result) error
}

// Sweep runs cells and records each result in the store as soon as the cell
// ends.
type Sweep struct {
	Config *matrix.Config
	Probes probe.Set
	// Self is the bmx executable, for {self} in commands.
	Self string
	// Dir is the run directory; logs go to Dir/logs.
	Dir   string
	Store Recorder
	// RunID names the run in the environment marker of its servers;
	// server.RunMarker(Dir) when empty.
	RunID string
	// Slots run cells concurrently; none means one slot with all GPUs.
	Slots []matrix.Slot
	// OnStart and OnCell, if set, are told when a cell starts on a slot and
	// when it ends (progress output). They may be called concurrently.
	OnStart func(slot int, cell matrix.Cell)
	OnCell  func(slot int, r record.Result)
	// ServerStarted, if set, is called each time a server has been
	// started (or has failed to start): what can wait (run.json's host
	// fingerprint, the classifier's build) waits for the first, so as not
	// to take the CPU from the supervisor's and the server's start.
	ServerStarted func()
	// Reference is the reference cell's ID: it runs alone, first, and the
	// other cells are compared with its answers (or with those of its
	// result among Evidence, in a resumed sweep).
	Reference string
	// PruneAfter, if above 0, is --prune's K: a cell one of whose values
	// has failed with one cause in K cells that differ in every other axis
	// is recorded as predicted instead of started.
	PruneAfter int
	// Evidence are earlier results (a resumed run's): they count for
	// pruning and dedupe as the results of this sweep do.
	Evidence []record.Result
	// StopOnSetup runs the first cell alone (the reference, when it is
	// first, always runs alone) and stops the sweep with a *SetupError when
	// it crashed because the setup is broken, not a backend (see
	// classify.Setup): every other cell would fail the same way.
	StopOnSetup bool
	// Dedupe does not start a cell that an "auto" cell of this sweep (or an
	// Evidence result) resolved to: it inherits that cell's verdict
	// (record.Result.InheritedFrom). Order the auto cells first
	// (AutoFirst) for it to save anything.
	Dedupe bool
	// Secrets are cut out of every result, and out of each cell's log; nil
	// is the config's with bmx's environment (Config.Secrets(os.Environ())).
	Secrets *matrix.Secrets

	secretsOnce sync.Once
	judgeOnce   sync.Once
	judge       *classify.Judge
	q           *queue
	gpus        *server.GPUs
	ports       server.Ports
	notesMu     sync.Mutex
	notes       []string
	// ranOn is the last cell started on each slot, by its GPUs.
	ranOn sync.Map
}

// judged judges r against ref through the sweep's Judge, which remembers
// the observations it judged: the healthy cells of a sweep mostly answer
// each probe alike, and each cell is judged more than once (before its
// performance probe, after it, again when it is retried), so most
// judgements come from memory. What it gives is what Result.Judge gives.
func (s *Sweep) judged(r *record.Result, ref *classify.Reference) {
	s.judgeOnce.Do(func() { s.judge = classify.NewJudge() })
	r.JudgeBy(s.judge, ref)
}

// note records a run-level remark once.
func (s *Sweep) note(msg string) {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	if !slices.Contains(s.notes, msg) {
		s.notes = append(s.notes, msg)
	}
}

// Notes are run-level remarks: no nvidia-smi, a failing GPU check.
func (s *Sweep) Notes() []string {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	return slices.Clone(s.notes)
}

// reference is the reference cell's answers once they are known; nil
// before, and for a sweep without a reference.
func (s *Sweep) reference() *classify.Reference {
	if s.q == nil {
		return nil
	}
	return s.q.ref
}

// secrets is the run's set of secret values (Secrets, or the config's and
// bmx's environment's).
func (s *Sweep) secrets() *matrix.Secrets {
	s.secretsOnce.Do(func() {
		if s.Secrets == nil {
			s.Secrets = s.Config.Secrets(os.Environ())
		}
	})
	return s.Secrets
}

// runID is RunID, or server.RunMarker(Dir) when it is empty, for Run and
// for a cell started by RunCell alone: a cell's teardown kills every
// process on the host whose marker starts with the cell's, so a marker must
// name its run, never be the bare "//cell#1" that any such cell would share.
func (s *Sweep) runID() string {
	if s.RunID == "" {
		return server.RunMarker(s.Dir)
	}
	return s.RunID
}

// ErrInterrupted is returned when ctx was cancelled during a sweep; the cells
// finished until then are in the store.
var ErrInterrupted = errors.New("sweep interrupted")

// Run sweeps the cells on the slots. It returns the finished results in
// completion order; the error is ErrInterrupted, an infrastructure failure,
// or, with StopOnSetup, a *SetupError after the first cell; never another
// failed cell.
//
// An infrastructure failure (the store cannot record a result, a log cannot
// be created) cancels the cells' context: no further cell starts, the
// servers in flight are torn down and their cut-short results are not
// recorded, and Run returns that failure once they are down.
func (s *Sweep) Run(ctx context.Context, cells []matrix.Cell) ([]record.Result, error) {
	return s.run(ctx, listOf(cells))
}

// run is Run of cells held as keys: each is built as it starts.
func (s *Sweep) run(ctx context.Context, cells cellList) ([]record.Result, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	s.q = s.newQueue(cells)
	p := newPass(s)
	// cctx ends on an interrupt and on the first infrastructure failure.
	// A failure cancels it before its cell's slot is free again, so no cell
	// starts after it; the cells in flight see it and are torn down.
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	err := p.loop(cctx, stop)
	if werr := p.g.Wait(); err == nil {
		err = werr
	}
	switch {
	case err != nil:
		return p.results, err
	case ctx.Err() != nil:
		return p.results, ErrInterrupted
	}
	return p.results, nil
}

// begin readies what every cell of a run needs: the log directory, the
// run's marker (which server.KillAll kills on a second interrupt) and the GPU
// check.
func (s *Sweep) begin() error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	s.RunID = s.runID()
	server.TrackRun(server.MarkerPrefix(s.RunID))
	gpus, err := server.NewGPUs(s.Config.GPU)
	if err != nil {
		s.note(err.Error())
	}
	s.gpus = gpus
	return nil
}

// record runs a cell on a slot and appends its result to the store. The
// result is nil when ctx ended while the cell ran: cut short, its verdict
// would describe bmx, not the backend, so it is not recorded. The error is an
// infrastructure failure. answered is runAttempt's; hold, if set, is waited
// for before the result is recorded (a setup check that passed or failed:
// then ctx has ended).
func (s *Sweep) record(ctx context.Context, slot int, gpus string, cell matrix.Cell, answered func(), hold <-chan struct{}) (*record.Result, error) {
	if s.OnStart != nil {
		s.OnStart(slot, cell)
	}
	r, err := s.runCell(ctx, gpus, cell, answered)
	if err != nil {
		return nil, err
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	r, err = s.keep(slot, r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// keep appends a cell's result to the store and reports it. It is where
// every result passes on its way out (the store, the progress, the run's
// report): the run's secrets are cut out of all of it here, and the result
// as kept is returned.
func (s *Sweep) keep(slot int, r record.Result) (record.Result, error) {
	r = matrix.RedactAll(s.secrets(), r)
	if err := s.Store.Append(r); err != nil {
		return r, err
	}
	if s.OnCell != nil {
		s.OnCell(slot, r)
	}
	return r, nil
}

// runCell waits for the slot's GPUs, runs the cell, and runs a crash or hang
// cell again up to Retries times; disagreeing runs make it flaky. answered
// is runAttempt's, for every attempt.
func (s *Sweep) runCell(ctx context.Context, slot string, cell matrix.Cell, answered func()) (record.Result, error) {
	if _, held, err := s.gpus.WaitFree(ctx, slot); err != nil {
		s.note("GPU check failed: " + err.Error())
	} else if held != "" {
		return s.heldSkip(cell, slot, held), nil
	}
	s.started(slot, cell)
	var attempts []record.Attempt
	for attempt := 1; ; attempt++ {
		r, err := s.runOnFreePort(ctx, slot, cell, attempt, answered)
		if err != nil || ctx.Err() != nil {
			return r, err
		}
		if len(attempts) > 0 {
			r.Attempts = attempts
			s.judged(&r, s.reference()) // disagreeing attempts make it flaky
		}
		retry := r.Verdict == classify.Crash || r.Verdict == classify.Hang
		if !retry || attempt > s.Config.Retries {
			return r, nil
		}
		attempts = append(attempts, record.Attempt{Verdict: r.Verdict, Signature: r.Signature, Reason: r.Reason, LogPath: r.LogPath})
	}
}

// runOnFreePort is runAttempt, started again on another port (up to
// portRaceRetries times) when another process bound the server's port
// between bmx finding it free and the server binding it: the host's doing,
// not the backend's. The result's problems say so.
func (s *Sweep) runOnFreePort(ctx context.Context, slot string, cell matrix.Cell, attempt int, answered func()) (record.Result, error) {
	var portTaken []string
	for {
		r, err := s.runAttempt(ctx, slot, cell, attempt, answered)
		if err != nil || ctx.Err() != nil {
			return r, err
		}
		if line, ok := lostPortRace(r); ok && len(portTaken) < portRaceRetries {
			portTaken = append(portTaken, fmt.Sprintf("attempt %d: the port was taken before the server bound it (%s); started again on another port", attempt, line))
			continue
		}
		r.Problems = append(portTaken, r.Problems...)
		return r, nil
	}
}

// portRaceRetries is how many times a cell whose server lost its port to
// another process starts again on another port.
const portRaceRetries = 2

// lostPortRace says whether r's server crashed because its port was taken
// (the line of its log that says so).
func lostPortRace(r record.Result) (string, bool) {
	if r.Verdict != classify.Crash {
		return "", false
	}
	cause, line := classify.Setup(r.Input(), r.Argv, r.Cell.Args)
	return line, cause == classify.SetupPort
}

// SplitSlots divides gpus into n slots of equal size (the remainder unused).
// With no known GPUs it returns n slots that share the host's GPUs, as a sim
// or CPU engine needs.
func SplitSlots(gpus []string, n int) ([]matrix.Slot, error) {
	if n < 1 {
		return nil, fmt.Errorf("--slots %d: want at least 1", n)
	}
	if len(gpus) == 0 {
		return make([]matrix.Slot, n), nil
	}
	if n > len(gpus) {
		return nil, fmt.Errorf("--slots %d: only %d GPUs are visible (%s)", n, len(gpus), strings.Join(gpus, ","))
	}
	size := len(gpus) / n
	slots := make([]matrix.Slot, n)
	for i := range slots {
		slots[i].GPUs = strings.Join(gpus[i*size:(i+1)*size], ",")
	}
	return slots, nil
}
