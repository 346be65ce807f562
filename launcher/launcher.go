// Package launcher owns the sweep loop and one server's life: it runs cells
// on GPU slots concurrently, starts the server of each cell under its own
// supervisor (bmx re-executed as a child subreaper, see Supervise) in a
// process group of its own with its output going to the cell's log file,
// waits for readiness while watching the process's exit, the ready timeout,
// the cell's deadline and the log for fatal lines, runs the probes (stopping
// at the first timeout of a server that has generated nothing), and tears
// the whole tree down (SIGTERM to the group, a grace period, SIGKILL, then
// every descendant the supervisor holds, whether it left the group or not)
// until its port and GPUs are free again. The tree dies with bmx too, even
// when bmx is SIGKILLed.
//
// It records what happened and hands the record to the classifier; it never
// judges text itself. A failed cell is data: only infrastructure errors (the
// run directory cannot be written) stop a sweep.
package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/evidence"
	"github.com/bmx-dev/bmx/launcher/probe"
	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/record"
)

// Readiness is polled every FastPoll for the first FastPollFor (a refused
// connection costs the server nothing, and a sim or small model is ready in
// well under a second), then every PollInterval.
const (
	// FastPoll finds a quick server ready within 5 ms of its start.
	FastPoll = 5 * time.Millisecond
	// FastPollFor covers a sim, a CPU engine or a small model (3000 polls
	// at most); a real model that is still loading after 15 s takes
	// minutes anyway.
	FastPollFor = 15 * time.Second
	// PollInterval adds at most 100 ms to a start that takes minutes.
	PollInterval = 100 * time.Millisecond
)

// dyingWait is how long bmx waits for a server whose connections failed to
// finish dying, so its exit and last log lines are part of the record: a
// Python server that lost its scheduler prints its traceback and exits within
// a second or two; one that takes longer is judged as it stands.
const dyingWait = 3 * time.Second

// Request limits of the launcher's own calls to a server.
const (
	// healthTimeout bounds one readiness poll: a server that takes longer
	// to answer /health is busy loading, and the next poll asks again.
	healthTimeout = 2 * time.Second
	// readyGenerateTimeout bounds the one-token generation that proves an
	// SGLang-style server ready: the first request may compile kernels or
	// capture a CUDA graph, which takes seconds, not minutes.
	readyGenerateTimeout = 30 * time.Second
	// serverInfoTimeout bounds /get_server_info, which only reads a dict:
	// a server that is slow to answer it does not say, and the cell goes on.
	serverInfoTimeout = 5 * time.Second
)

// Response bounds: what bmx reads of an answer it does not keep.
const (
	// healthBodyMax is read of a /health reply (to reuse the connection).
	healthBodyMax = 64 << 10
	// serverInfoMax bounds /get_server_info's JSON: SGLang's is a few KiB.
	serverInfoMax = 4 << 20
	// resolvedLogMax is how much of a log is searched for "Using X
	// backend" lines: engines print them while loading, near the start.
	resolvedLogMax = 16 << 20
)

// fatalSettle is how long the log must be quiet after a fatal line (at most
// fatalSettleMax) before bmx tears the server down, so the traceback that
// follows the line is in the record.
const (
	fatalSettle    = 60 * time.Millisecond
	fatalSettleMax = 700 * time.Millisecond
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
	// RunMarker(Dir) when empty.
	RunID string
	// Slots run cells concurrently; none means one slot with all GPUs.
	Slots []matrix.Slot
	// OnStart and OnCell, if set, are told when a cell starts on a slot and
	// when it ends (progress output). They may be called concurrently.
	OnStart func(slot int, cell matrix.Cell)
	OnCell  func(slot int, r record.Result)
	// Reference is the reference cell's ID: it runs alone, first.
	Reference string
	// Ref, once the reference cell has run, is what other cells are
	// compared with; a resumed sweep sets it from the earlier result.
	Ref *classify.Reference
	// PruneAfter, if above 0, is --prune's K: a cell one of whose values
	// has failed with one cause in K cells that differ in every other axis
	// is recorded as predicted instead of started. Evidence are earlier
	// results (a resumed run's) that count as well.
	PruneAfter int
	Evidence   []record.Result
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

	gpu     *gpuCheck
	ports   sync.Map // ports handed to running cells
	notesMu sync.Mutex
	notes   []string
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

// runID is RunID, or RunMarker(Dir) when it is empty, for Run and for a
// cell started by RunCell alone: a cell's teardown kills every process on
// the host whose marker starts with the cell's, so a marker must name its
// run, never be the bare "//cell#1" that any such cell would share.
func (s *Sweep) runID() string {
	if s.RunID == "" {
		return RunMarker(s.Dir)
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
	if err := os.MkdirAll(filepath.Join(s.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	s.RunID = s.runID()
	active.addMarker(MarkerPrefix(s.RunID))
	gpu, err := newGPUCheck(s.Config.GPU)
	if err != nil {
		s.note(err.Error())
	}
	s.gpu = gpu
	slots := s.Slots
	if len(slots) == 0 {
		slots = []matrix.Slot{{}}
	}
	free := make(chan int, len(slots))
	for i := range slots {
		free <- i
	}
	// cctx ends on an interrupt and on the first infrastructure failure.
	// A failure cancels it before its cell's slot is free again, so no cell
	// starts after it; the cells in flight see it and are torn down.
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var (
		mu      sync.Mutex
		results []record.Result
		prune   *pruner
	)
	if s.PruneAfter > 0 {
		prune = newPruner(s.PruneAfter, s.Config, s.Evidence)
	}
	var dups *twins
	if s.Dedupe {
		dups = newTwins(s.Config, cells, s.Evidence)
	}
	one := func(slot int, cell matrix.Cell) (*record.Result, error) {
		defer func() { free <- slot }()
		r, err := s.record(cctx, slot, slots[slot].GPUs, cell)
		if err != nil {
			stop(err)
			return nil, err
		}
		if r != nil {
			mu.Lock()
			results = append(results, *r)
			mu.Unlock()
			prune.add(*r)
			dups.add(*r)
		}
		return r, nil
	}
	// decide is the result of a cell that needs no server: an auto cell
	// that ran resolved to it, or earlier failures predict it (nil: it
	// needs one). It is asked once a slot is free, so every cell that
	// ended before counts as evidence.
	decide := func(cell matrix.Cell) *record.Result {
		if src, ok := dups.source(cell); ok {
			r := s.inherited(cell, src)
			return &r
		}
		if pred := prune.predict(cell); pred != nil {
			r := s.predicted(cell, pred)
			return &r
		}
		return nil
	}
	// keepDecided records a decided result on slot and frees the slot.
	keepDecided := func(slot int, r *record.Result) error {
		err := s.keep(slot, *r)
		free <- slot
		if err != nil {
			return err
		}
		mu.Lock()
		results = append(results, *r)
		mu.Unlock()
		return nil
	}
	if len(cells) > 0 && (s.Reference != "" && cells[0].ID == s.Reference || s.StopOnSetup) {
		// A resumed sweep's first cells left may need no server: they are
		// decided first (the reference's answers taken from its decided
		// result), and the first cell that needs one runs alone.
		for len(cells) > 0 {
			slot := <-free
			d := decide(cells[0])
			if d == nil {
				free <- slot
				break
			}
			if cells[0].ID == s.Reference && s.Ref == nil {
				s.Ref = d.AsReference()
			}
			if err := keepDecided(slot, d); err != nil {
				return results, err
			}
			cells = cells[1:]
		}
	}
	isRef := len(cells) > 0 && s.Reference != "" && cells[0].ID == s.Reference
	if len(cells) > 0 && (isRef || s.StopOnSetup) {
		// The reference runs alone, first, so every other cell can be
		// compared with it; the first cell runs alone to find a broken
		// setup before every cell fails of it.
		r, err := one(<-free, cells[0])
		if err != nil {
			return results, err
		}
		if r == nil {
			return results, ErrInterrupted
		}
		if isRef {
			s.Ref = r.AsReference()
		}
		if s.StopOnSetup {
			if err := setupFailure(*r, isRef); err != nil {
				return results, err
			}
		}
		cells = cells[1:]
	}
	g := new(errgroup.Group)
	g.SetLimit(len(slots))
loop:
	for _, cell := range cells {
		var slot int
		select {
		case <-cctx.Done():
			break loop
		case slot = <-free:
		}
		if cctx.Err() != nil { // both were ready: start no new cell
			free <- slot
			break
		}
		if d := decide(cell); d != nil {
			if err := keepDecided(slot, d); err != nil {
				stop(err)
				_ = g.Wait()
				return results, err
			}
			continue
		}
		g.Go(func() error {
			_, err := one(slot, cell)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return results, err
	}
	if ctx.Err() != nil {
		return results, ErrInterrupted
	}
	return results, nil
}

// record runs a cell on a slot and appends its result to the store. The
// result is nil when ctx ended while the cell ran: cut short, its verdict
// would describe bmx, not the backend, so it is not recorded. The error is an
// infrastructure failure.
func (s *Sweep) record(ctx context.Context, slot int, gpus string, cell matrix.Cell) (*record.Result, error) {
	if s.OnStart != nil {
		s.OnStart(slot, cell)
	}
	r, err := s.runCell(ctx, gpus, cell)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	if err := s.keep(slot, r); err != nil {
		return nil, err
	}
	return &r, nil
}

// keep appends a cell's result to the store and reports it.
func (s *Sweep) keep(slot int, r record.Result) error {
	if err := s.Store.Append(r); err != nil {
		return err
	}
	if s.OnCell != nil {
		s.OnCell(slot, r)
	}
	return nil
}

// runCell waits for the slot's GPUs, runs the cell, and runs a crash or hang
// cell again up to Retries times; disagreeing runs make it flaky.
func (s *Sweep) runCell(ctx context.Context, slot string, cell matrix.Cell) (record.Result, error) {
	if _, held, err := s.gpu.waitFree(ctx, slot); err != nil {
		s.note("GPU check failed: " + err.Error())
	} else if held != "" {
		return record.Result{
			Cell: s.Config.RedactCell(cell), Verdict: classify.Skipped, Slot: slot, Observations: []evidence.Observation{}, Probes: []classify.ProbeVerdict{},
			Reason:  fmt.Sprintf("not started: GPU memory still held after %s (%s); see the problems of the cell that ran before on this slot", s.Config.GPU.FreeTimeout, held),
			Started: time.Now().UTC(), Ended: time.Now().UTC(),
		}, nil
	}
	var attempts []record.Attempt
	for attempt := 1; ; attempt++ {
		r, err := s.RunCell(ctx, slot, cell, attempt)
		if err != nil || ctx.Err() != nil {
			return r, err
		}
		if len(attempts) > 0 {
			r.Attempts = attempts
			r.Judge(s.Ref) // disagreeing attempts make it flaky
		}
		retry := r.Verdict == classify.Crash || r.Verdict == classify.Hang
		if !retry || attempt > s.Config.Retries {
			return r, nil
		}
		attempts = append(attempts, record.Attempt{Verdict: r.Verdict, Signature: r.Signature, Reason: r.Reason, LogPath: r.LogPath})
	}
}

// RunCell starts one attempt of a cell's server on slot, probes it, stops it
// and judges it. The error is for infrastructure failures only (the log file
// cannot be created); a server that cannot even start is a crashed cell.
func (s *Sweep) RunCell(ctx context.Context, slot string, cell matrix.Cell, attempt int) (r record.Result, err error) {
	cfg := s.Config
	r = record.Result{Cell: cfg.RedactCell(cell), Slot: slot, Started: time.Now().UTC(), Observations: []evidence.Observation{}}
	defer func() {
		r.Ended = time.Now().UTC()
		r.Timings.TotalMS = r.Ended.Sub(r.Started).Milliseconds()
	}()
	port, err := s.port(cfg.Server.Host)
	if err != nil {
		return r, err
	}
	defer s.ports.Delete(port)
	r.Port = port
	argv, env := cfg.Command(cell, matrix.Runtime{Self: s.Self, Port: port, GPUs: slot})
	marker := MarkerPrefix(s.runID()) + cell.ID + "#" + strconv.Itoa(attempt)
	env = append(env, MarkerEnv+"="+marker)
	if slot != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+slot)
	}
	// What is recorded is redacted; the server gets the real values. What
	// the server prints of them is cut out of its log afterwards.
	secrets := matrix.Secrets(env, argv)
	defer func() {
		if len(secrets) > 0 {
			if err := redactFile(r.LogPath, secrets); err != nil {
				r.Problems = append(r.Problems, "redact secrets in the log: "+err.Error())
			}
			r.LogTail = matrix.RedactText(r.LogTail, secrets)
			for i := range r.Observations {
				r.Observations[i].Text = matrix.RedactText(r.Observations[i].Text, secrets)
				r.Observations[i].Err = matrix.RedactText(r.Observations[i].Err, secrets)
			}
			r.Signature, r.Evidence = matrix.RedactText(r.Signature, secrets), matrix.RedactText(r.Evidence, secrets)
		}
	}()
	r.Argv, r.Env = matrix.RedactArgv(argv), matrix.RedactEnv(env)
	r.Repro = Repro(r.Env, r.Argv)
	r.LogPath = filepath.Join(s.Dir, "logs", record.LogName(cell, attempt))
	// Mkdir, not MkdirAll: a run directory removed under a running sweep
	// is an infrastructure failure, not something to create again.
	if err := os.Mkdir(filepath.Dir(r.LogPath), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return r, fmt.Errorf("create log directory: %w", err)
	}
	logf, err := os.Create(r.LogPath)
	if err != nil {
		return r, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# bmx: cell %s (attempt %d, slot %q)\n# bmx: %s\n", cell.ID, attempt, slot, r.Repro)

	srv, err := start(argv, processEnv(env), logf)
	if err != nil {
		// Nothing ran: the record says why, as a crash at start would.
		fmt.Fprintf(logf, "bmx: start server: %v\n", err)
		r.LogTail, _ = readTail(r.LogPath)
		r.Problems = append(r.Problems, "start server: "+err.Error())
		r.Exit = &classify.Exit{Code: 127} // as a shell reports a command it cannot run
		r.Judge(s.Ref)
		return r, nil
	}
	watch := watchLog(r.LogPath, cfg.Server.ReadyLog)
	defer watch.stop()

	base := "http://" + hostPort(cfg.Server.Host, port)
	t0 := time.Now()
	// The cell's one deadline bounds readiness and probes together; ctx
	// stays the sweep's, so an interrupt is still told from a deadline.
	limit := s.cellTimeout()
	cctx, cancelCell := context.WithTimeout(ctx, limit)
	defer cancelCell()
	ready, timedOut, fatal := s.waitReady(cctx, srv, watch, base)
	if ready {
		r.Timings.ReadyMS = time.Since(t0).Milliseconds()
		r.Resolved = resolvedBackends(cctx, base)
		for k, v := range resolvedFromLog(r.LogPath) {
			if r.Resolved == nil {
				r.Resolved = map[string]string{}
			}
			r.Resolved[k] = v
		}
		if cell.HasAuto() {
			r.Cell.Resolved = cfg.ResolvedValues(cell, r.Resolved)
		}
		r.Observations, fatal = s.probe(cctx, srv, watch, base)
		r.Timings.ProbesMS = time.Since(t0).Milliseconds() - r.Timings.ReadyMS
		for _, o := range r.Observations {
			if o.ErrKind == evidence.Timeout {
				timedOut = true
			}
		}
		if fatal == "" && !timedOut {
			t := time.Now()
			if r.Perf = s.perf(cctx, srv, base, &r); r.Perf != nil {
				r.Timings.PerfMS = time.Since(t).Milliseconds()
			}
		}
	}
	pastDeadline := ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	if pastDeadline {
		timedOut = true
		r.Problems = append(r.Problems, fmt.Sprintf("the cell's deadline (cell_timeout %s) passed before its probes ended", limit))
	}
	if fatal == "" && ctx.Err() == nil {
		// A fatal line can land between the watcher's reads and the end of
		// the probes (or the process's exit); read the log to its end now.
		fatal = watch.sync()
	}
	if fatal != "" && srv.alive() {
		settle(watch)
		r.Fatal = fatal
	}
	r.TimedOut = timedOut
	if timedOut && !ready && !pastDeadline {
		r.Problems = append(r.Problems, fmt.Sprintf("not ready within the ready timeout (%s)", cfg.Server.ReadyTimeout))
	}
	if timedOut && srv.alive() && ctx.Err() == nil {
		r.Forensics = forensics(ctx, srv, s.gpu)
	}
	r.Exit = srv.exit()
	// The tail is read before teardown: the record is the server as it was
	// judged, not its shutdown messages.
	r.LogTail, _ = readTail(r.LogPath)

	t1 := time.Now()
	r.Stop = srv.stop(cfg.Server.StopGrace)
	r.Problems = append(r.Problems, srv.teardownProblems()...)
	r.Orphans = srv.done.Escaped
	if n := KillMarked(marker); n > 0 {
		// Only a supervisor that was itself SIGKILLed leaves these.
		r.Orphans += n
		r.Problems = append(r.Problems, fmt.Sprintf("%d processes outlived the server's supervisor and were killed by marker", n))
	}
	if err := waitPortFree(cfg.Server.Host, port, portFreeWait); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	t2 := time.Now()
	first, held, err := s.gpu.waitFree(context.WithoutCancel(ctx), slot)
	switch {
	case err == nil && held != "":
		r.Problems = append(r.Problems, fmt.Sprintf("GPU memory still held %s after teardown: %s", cfg.GPU.FreeTimeout, held))
	case err == nil && first != "":
		r.Problems = append(r.Problems, fmt.Sprintf("GPU memory was still held when the server's processes were gone (%s); free after %s, before the next cell started",
			first, time.Since(t2).Round(time.Millisecond)))
	}
	if s.gpu != nil {
		r.Timings.GPUWaitMS = time.Since(t2).Milliseconds()
	}
	r.Timings.StopMS = time.Since(t1).Milliseconds()
	r.Judge(s.Ref)
	return r, nil
}

// cellTimeout is the cell's deadline from its start to the end of its
// probes: server.cell_timeout, or the ready timeout plus a probe timeout for
// each probe and one more (the model name, the resolved backends).
func (s *Sweep) cellTimeout() time.Duration {
	srv := s.Config.Server
	if srv.CellTimeout > 0 {
		return srv.CellTimeout
	}
	return srv.ReadyTimeout + time.Duration(len(s.Probes.Probes)+1)*srv.ProbeTimeout
}

// port finds a free port no other running cell of this sweep holds.
func (s *Sweep) port(host string) (int, error) {
	for range portTries {
		p, err := freePort(host)
		if err != nil {
			return 0, err
		}
		if _, taken := s.ports.LoadOrStore(p, true); !taken {
			return p, nil
		}
	}
	return 0, errors.New("find a free port: the kernel kept offering ports in use")
}

// settle waits until the log has been quiet for fatalSettle, at most
// fatalSettleMax, so the traceback after a fatal line is on disk.
func settle(w *logWatch) {
	deadline := time.Now().Add(fatalSettleMax)
	for time.Now().Before(deadline) && time.Since(w.lastGrowth()) < fatalSettle {
		time.Sleep(WatchInterval / 2)
	}
}

// waitReady polls the health path until it answers 200 (and the ready log
// line, if configured, has appeared), the process exits, a fatal line is
// logged, the ready timeout passes or ctx is cancelled.
func (s *Sweep) waitReady(ctx context.Context, srv *server, watch *logWatch, base string) (ready, timedOut bool, fatal string) {
	cfg := s.Config.Server
	deadline := time.NewTimer(cfg.ReadyTimeout)
	defer deadline.Stop()
	t0 := time.Now()
	tick := time.NewTimer(FastPoll)
	defer tick.Stop()
	client := &http.Client{Timeout: healthTimeout}
	for {
		if time.Since(t0) < FastPollFor {
			tick.Reset(FastPoll)
		} else {
			tick.Reset(PollInterval)
		}
		if healthy(ctx, client, base+cfg.Health) && isClosed(watch.ready) && s.generates(ctx, base) {
			return true, false, ""
		}
		select {
		case <-srv.exited:
			return false, false, ""
		case line := <-watch.fatal:
			return false, false, line
		case <-deadline.C:
			return false, true, ""
		case <-ctx.Done():
			return false, false, ""
		case <-tick.C:
		}
	}
}

// generates checks a one-token generation when the config asks for it.
func (s *Sweep) generates(ctx context.Context, base string) bool {
	if !s.Config.Server.ReadyGenerate {
		return true
	}
	c := &probe.Client{BaseURL: base, Model: s.Config.Probes.Model, Timeout: readyGenerateTimeout, Engine: s.Config.Engine}
	return c.Generate(ctx) == nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func healthy(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, healthBodyMax))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// client is the probe client for a cell's server at base.
func (s *Sweep) client(base string) *probe.Client {
	return &probe.Client{BaseURL: base, Model: s.Config.Probes.Model, Timeout: s.Config.Server.ProbeTimeout, Engine: s.Config.Engine}
}

// perf measures serving speed on a cell whose answers are correct (or
// degraded), while its server is still up: the performance probe of the
// probe set, stopped if the server dies.
func (s *Sweep) perf(ctx context.Context, srv *server, base string, r *record.Result) *evidence.Perf {
	if !s.Probes.Perf.Enabled {
		return nil
	}
	pre := *r
	pre.Judge(s.Ref)
	if pre.Verdict != classify.Correct && pre.Verdict != classify.Degraded {
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// A fatal line is left to the watcher's reader: a server that goes
		// down under the load is judged as it ends.
		select {
		case <-srv.exited:
		case <-pctx.Done():
		}
		cancel()
	}()
	client := s.client(base)
	return client.Perf(pctx, s.Probes.Perf)
}

// probe runs the probe set, one probe at a time; requests stop as soon as
// the server process exits or logs a fatal line. A probe that times out
// while the server has generated nothing yet makes the cell a hang: the
// probes after it are not sent (each would wait out its own timeout for the
// same answer). If connections failed, it gives a dying server a moment to
// finish dying so that its exit is on record.
func (s *Sweep) probe(ctx context.Context, srv *server, watch *logWatch, base string) ([]evidence.Observation, string) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fatalCh := make(chan string, 1)
	go func() {
		select {
		case <-srv.exited:
			cancel()
		case line := <-watch.fatal:
			fatalCh <- line
			cancel()
		case <-pctx.Done():
		}
	}()
	client := s.client(base)
	var obs []evidence.Observation
	for i, p := range s.Probes.Probes {
		obs = append(obs, client.Run(pctx, probe.Set{Name: s.Probes.Name, Probes: []probe.Probe{p}})...)
		if hung(obs) {
			obs = append(obs, notSent(s.Probes.Probes[i+1:], "not sent: an earlier probe timed out and the server had generated nothing")...)
			break
		}
	}
	cancel()
	select {
	case line := <-fatalCh:
		return obs, line
	default:
	}
	for _, o := range obs {
		if o.ErrKind == evidence.Connection || o.HTTPStatus >= 500 {
			t := time.NewTimer(dyingWait)
			select {
			case <-srv.exited:
			case line := <-watch.fatal:
				t.Stop()
				return obs, line
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			break
		}
	}
	return obs, ""
}

// hung reports whether a request has timed out while no request so far got
// a single generated token: the server is up but does not generate.
func hung(obs []evidence.Observation) bool {
	timedOut := false
	for _, o := range obs {
		if o.Kind == evidence.ModelInfo {
			continue
		}
		if o.Text != "" || o.Reasoning != "" || (o.Tokens != nil && *o.Tokens > 0) {
			return false
		}
		timedOut = timedOut || o.ErrKind == evidence.Timeout
	}
	return timedOut
}

// notSent records probes that were not sent, and why.
func notSent(probes []probe.Probe, why string) []evidence.Observation {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a client with a done context sends nothing and says so
	obs := (&probe.Client{}).Run(ctx, probe.Set{Probes: probes})
	for i := range obs {
		obs[i].Err = why
	}
	return obs
}

// resolvedBackends reads what the server resolved its backends to (SGLang's
// /get_server_info); nil when the server does not say.
func resolvedBackends(ctx context.Context, base string) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, serverInfoTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/get_server_info", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var info map[string]any
	if json.NewDecoder(io.LimitReader(resp.Body, serverInfoMax)).Decode(&info) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range info {
		if sv, ok := v.(string); ok && strings.HasSuffix(k, "_backend") {
			out[k] = sv
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// redactFile rewrites a log with each secret replaced, line by line.
func redactFile(path string, secrets []string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".redact-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	br := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(tmp, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if _, werr := w.WriteString(matrix.RedactText(line, secrets)); werr != nil {
			tmp.Close()
			return werr
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			tmp.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Repro is the shell command that starts a cell's server by hand: its
// environment additions (bmx's own marker left out) and argv, quoted.
func Repro(env, argv []string) string {
	var parts []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			parts = append(parts, kv)
		}
	}
	if len(parts) > 0 {
		parts = append([]string{"env"}, parts...)
	}
	return matrix.ShellJoin(append(parts, argv...))
}

// usingBackendRe matches vLLM's "Using FLASHINFER_CUTLASS Fp8 MoE backend
// out of potential backends: [...]" style lines.
var usingBackendRe = regexp.MustCompile(`\bUsing ([A-Za-z0-9_]+) ((?:[A-Za-z0-9]+ ){0,3})backend\b`)

// resolvedFromLog reads the backends an engine says it chose in its log
// ("Using X ... backend"), keyed by what they are for ("fp8_moe_backend").
func resolvedFromLog(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(f, resolvedLogMax))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := usingBackendRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(m[2]), " ", "_"))
		if key == "" {
			key = "backend"
		} else {
			key += "_backend"
		}
		out["log:"+key] = m[1]
	}
	return out
}

// processEnv is bmx's environment plus the cell's additions. Python output
// is made unbuffered so the log is complete up to the moment a server dies.
// A marker inherited from an outer bmx is replaced.
func processEnv(add []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			env = append(env, kv)
		}
	}
	if os.Getenv("PYTHONUNBUFFERED") == "" {
		env = append(env, "PYTHONUNBUFFERED=1")
	}
	return append(env, add...)
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// ErrUnreachable means nothing accepts connections at a server's address.
var ErrUnreachable = errors.New("cannot reach the server")

// reachWait bounds the connection check of a server that should be up: a
// listening server accepts in milliseconds; a host that drops packets would
// otherwise cost every probe its whole timeout.
const reachWait = 10 * time.Second

// CheckURL says whether base is a server's base URL bmx can probe: http or
// https, with a host, no query or fragment.
func CheckURL(base string) error {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL such as http://127.0.0.1:30000", base)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host: want a URL such as http://127.0.0.1:30000", base)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: a base URL has no query or fragment", base)
	}
	return nil
}

// Reachable checks that something accepts TCP connections at base (a URL
// CheckURL accepts), so that a server that is not there is told apart from a
// server that fails its probes.
func Reachable(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	d := net.Dialer{Timeout: reachWait}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, base, err)
	}
	return conn.Close()
}

// ProbeServer sends set to a server that is already up (bmx starts and stops
// nothing) and judges the answers as a sweep judges a cell's, without log or
// exit status to go on.
func ProbeServer(ctx context.Context, client *probe.Client, set probe.Set) (classify.Judgement, []evidence.Observation) {
	obs := client.Run(ctx, set)
	in := classify.Input{Observations: obs}
	in.TimedOut = slices.ContainsFunc(obs, func(o evidence.Observation) bool { return o.ErrKind == evidence.Timeout })
	return classify.Cell(in), obs
}
