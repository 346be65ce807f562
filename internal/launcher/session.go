package launcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// SessionOptions say what a session sweeps and where. A Session reads them
// and never changes them: what a resume takes from the run it finishes is
// kept apart.
type SessionOptions struct {
	// Config is the matrix file; "" is the built-in simulated host, or
	// with Resume the resumed run's own config.
	Config string
	// Vars fill the config's [vars]; on a resume they override the run's.
	Vars map[string]string
	// Only keeps the cells with these axis=value pairs; on a resume none
	// means the run's own filter.
	Only []string
	// Out is the directory that holds run directories.
	Out string
	// Resume is a run directory to finish: its finished cells are skipped.
	Resume string
	// Force resumes although the config or its vars changed since.
	Force bool
	// Slots splits the visible GPUs into this many slots when the config
	// has no [[slot]] (0 = one slot with all GPUs); more than MaxSlots is a
	// *ConfigError. Slots beyond the number of cells to run are dropped.
	Slots int
	// Shard runs only this shard's cells (the zero Shard: all of them),
	// in a run directory named for it; a resume keeps the run's own.
	Shard matrix.Shard
	// MaxCells refuses a matrix of more cells (0: matrix.DefaultMaxCells).
	MaxCells int
	// Order overrides the config's order key ("" keeps it); one that is
	// not in matrix.Orders is a *ConfigError.
	Order string
	// Prune turns pruning on (as the config's prune key does); PruneAfter
	// overrides prune_after's K (0 keeps it; below 2 is a *ConfigError). A
	// resume keeps the run's.
	Prune      bool
	PruneAfter int
	// Confirm, with Resume, runs the cells --prune predicted (and prunes
	// nothing).
	Confirm bool
	// Baseline is an earlier run directory whose verdicts the informative
	// order prefers likely-working cells by ("" = none). It is loaded once
	// and handed on in the Outcome.
	Baseline string
	// KeepGoing sweeps on when the first cell (the reference, when it runs
	// first) fails because the setup is broken; without it the sweep stops
	// there with a *SetupError.
	KeepGoing bool
	// Dedupe turns dedupe on (as the config's dedupe key does): a cell an
	// "auto" cell resolved to is not started and inherits its verdict; auto
	// cells run before the cells they may turn out to be. A resume keeps
	// the run's.
	Dedupe bool
	// Self is the bmx executable, for {self} in commands.
	Self string
	// Version is bmx's version, recorded in run.json; it is called once,
	// from another goroutine, once the first server has started (nil: "").
	Version func() string
	// Log gets one-line status messages (where the run goes, notes,
	// warnings); nil discards them.
	Log *log.Logger
	// Progress, if set, is told as cells start and end.
	Progress Progress
	// Blamed names the axis values a baseline run's failures are blamed on
	// (its blame table's "to blame"), which the informative order starts
	// late; nil weighs the baseline's verdicts alone. The session analyses
	// no run itself; the CLI passes reports.Blamed.
	Blamed func(baseline *record.Report) []matrix.AxisValue
	// WriteReports writes the report files into the run directory at the
	// end of the run, interrupted or not. The session renders nothing
	// itself; the CLI passes reports.WriteFiles.
	WriteReports func(dir string, rep *record.Report) error
}

// Progress is told how a sweep goes, for a status display. Start and Done
// are called from the cells' goroutines, concurrently.
type Progress interface {
	// Begin is called once before the first cell, with the number of
	// cells to run and of slots they run on.
	Begin(cells, slots int)
	Start(slot int, cell matrix.Cell)
	Done(slot int, r record.Result)
	// End is called once after the last cell.
	End()
}

// ConfigError is a problem of the config or of the options, found before
// anything started (exit status 2 in the CLI).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// ErrStoreLost means the results store is no longer the file at its path
// (the run directory was removed or replaced during the sweep).
var ErrStoreLost = errors.New("the results store is gone")

// Outcome is what a session leaves: its run directory and the report of
// every cell finished in it, earlier attempts of a resumed run included.
type Outcome struct {
	Dir    string
	Report *record.Report
	// Baseline is the --baseline run, loaded once for the order and for
	// whatever compares the run with it (--fail-on regression); nil
	// without one.
	Baseline *record.Report
}

// Session owns one run of a sweep from start to end: it loads the matrix
// (the run's own when resuming), checks it before any server starts,
// creates or reopens the run directory, writes run.json, keeps the results
// store, sweeps the cells that have not run, and has the report files
// written at the end. A Session runs once.
type Session struct {
	opts SessionOptions
	log  *log.Logger

	cfg    *matrix.Config
	stream *matrix.Stream
	probes probe.Set
	only   []string
	slots  []matrix.Slot
	prev   *record.Run     // the run being resumed; nil for a new one
	prior  []record.Result // its finished cells
	notes  []string        // remarks for run.json found while preparing
	cells  cellList        // the cells to run, built as each starts
	total  int             // the run's cells (its shard's), done or not
	prune  int             // --prune's K; 0 = off
	// baseline is the --baseline run; nil without one.
	baseline *record.Report

	// shard is the run's shard; nil for a whole sweep.
	shard *record.ShardRecord
	// secrets are the run's secret values (the config's and bmx's
	// environment's): cut out of run.json and of every result.
	secrets *matrix.Secrets
	// lock is the run directory's, held from before anything is written
	// into it until Run returns.
	lock *record.Lock
}

// NewSession prepares a session; Run runs it.
func NewSession(opts SessionOptions) *Session {
	l := opts.Log
	if l == nil {
		l = log.New(io.Discard, "", 0)
	}
	s := &Session{opts: opts}
	s.log = log.New(redactingWriter{w: l.Writer(), s: s}, l.Prefix(), l.Flags())
	return s
}

// redactingWriter is the session's log writer: the run's secrets are cut
// out of each line. The secrets are known once the config is loaded,
// before anything logs from another goroutine.
type redactingWriter struct {
	w io.Writer
	s *Session
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.s.secrets.Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactedError is an error whose message had the run's secrets cut out;
// errors.Is and errors.As see the error it stands for.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact is err with the run's secrets cut out of its message.
func (s *Session) redact(err error) error {
	if err == nil {
		return nil
	}
	if msg := s.secrets.Text(err.Error()); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// Run sweeps. The Outcome is set once the run directory exists, even with an
// error (ErrInterrupted before that comes with none). The error is a *ConfigError (nothing was started), ErrInterrupted
// (ctx ended; the finished cells are kept), server.ErrUnsupported, a *SetupError
// (the first cell showed the setup broken, unless KeepGoing; it is kept and
// the reports are written), or an infrastructure failure; a failed cell is
// otherwise never an error.
func (s *Session) Run(ctx context.Context) (*Outcome, error) {
	if err := server.CanSweep(); err != nil {
		return nil, err
	}
	// One slot's supervisor starts while the config is read (see
	// server.Prespawn); prepare asks for the other slots' once it knows them.
	server.Prespawn(1)
	defer func() {
		if err := s.lock.Unlock(); err != nil {
			s.log.Printf("release the run directory: %v", err)
		}
	}()
	out, err := s.run(ctx)
	return out, s.redact(err)
}

// run is Run once the OS can sweep; its error may hold a secret.
func (s *Session) run(ctx context.Context) (*Outcome, error) {
	dir, run, err := s.prepare(ctx)
	if err != nil {
		if ctx.Err() != nil { // a help command or nvidia-smi cut short
			return nil, ErrInterrupted
		}
		return nil, err
	}
	// run.json is written beside the first cell's start (the host's
	// fingerprint and bmx's version take tens of milliseconds: nvidia-smi
	// twice, git in a source build); the first result waits for it.
	firstServer := make(chan struct{})
	started := sync.OnceFunc(func() { close(firstServer) })
	written := s.writeRunFirst(ctx, dir, run, firstServer, started)
	store, err := openStore(dir, written)
	if err != nil {
		_ = written()
		return &Outcome{Dir: dir}, err
	}
	defer store.Close()
	results, notes, sweepErr := s.sweep(ctx, dir, store, started)
	_ = written() // finish writes run.json again
	return s.finish(dir, run, results, notes, sweepErr)
}

// prepare loads and checks everything, then opens the run directory.
func (s *Session) prepare(ctx context.Context) (string, *record.Run, error) {
	if err := s.load(ctx); err != nil {
		return "", nil, err
	}
	if err := s.check(ctx); err != nil {
		return "", nil, err
	}
	if server.CanSweep() == nil {
		// The slots' supervisors start while the run directory is opened
		// (one has been on its way since Run began).
		server.Prespawn(max(len(s.slots), 1))
	}
	return s.open(ctx)
}

// ProbeSet is the config's probe set: its probe file, or a built-in set.
// A probe file that cannot be read and a set that is not built in are
// reported at the config's line that names them.
func ProbeSet(cfg *matrix.Config) (probe.Set, error) {
	if cfg.Probes.File != "" {
		set, err := probe.LoadFile(cfg.Probes.File)
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return set, probeConfigError(cfg, "file", err)
		}
		return set, err
	}
	set, err := probe.Builtin(cfg.Probes.Set)
	if err != nil {
		return set, probeConfigError(cfg, "set", err)
	}
	return set, nil
}

// probeConfigError names the config file, line and key of the probes' key
// whose value err is about.
func probeConfigError(cfg *matrix.Config, key string, err error) error {
	return fmt.Errorf("%w: %w", matrix.ErrInvalid, &matrix.ConfigError{File: cfg.Path,
		Line: matrix.KeyLine([]byte(cfg.Source), "probes", key), Key: "probes." + key, Msg: err.Error()})
}

// load reads the resumed run, the matrix, the probe set and the slots, and
// picks the cells to run.
func (s *Session) load(ctx context.Context) error {
	o := s.opts
	if err := o.checkOrder(); err != nil {
		return err
	}
	if err := o.checkSlots(); err != nil {
		return err
	}
	path, vars, only := o.Config, maps.Clone(o.Vars), o.Only
	if o.Resume != "" {
		prev, err := record.ReadRunDir(o.Resume)
		if err != nil {
			return configErrorf("--resume: %w", err)
		}
		// Before anything of the run is changed (a torn line cut off, the
		// earlier attempt's servers killed by their marker).
		if err := s.lockDir(o.Resume); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		s.prev = prev
		if path == "" && prev.ConfigPath != matrix.BuiltinName {
			path = prev.ConfigPath
		}
		// The run's own vars, then those given now; a secret must be
		// given again.
		vars = map[string]string{}
		for k, v := range prev.Vars {
			if !strings.Contains(v, matrix.Redacted) {
				vars[k] = v
			}
		}
		maps.Copy(vars, o.Vars)
		if len(only) == 0 {
			only = prev.Only
		}
	}
	cfg, stream, err := loadStream(path, vars, only, o.MaxCells)
	if err != nil {
		return &ConfigError{Err: err}
	}
	s.secrets = cfg.Secrets(os.Environ())
	for _, w := range stream.Warnings {
		s.log.Printf("warning: %s", w)
	}
	s.cfg, s.stream, s.only = cfg, stream, only
	if s.probes, err = ProbeSet(cfg); err != nil {
		return &ConfigError{Err: err}
	}
	s.slots = cfg.Slots
	if len(s.slots) > 0 {
		if err := checkSlotGPUs(s.slots, server.VisibleGPUs(ctx, cfg.GPU, os.Getenv("CUDA_VISIBLE_DEVICES"))); err != nil {
			return &ConfigError{Err: err}
		}
	} else if o.Slots > 0 {
		gpus := server.VisibleGPUs(ctx, cfg.GPU, os.Getenv("CUDA_VISIBLE_DEVICES"))
		if s.slots, err = SplitSlots(gpus, o.Slots); err != nil {
			return &ConfigError{Err: err}
		}
	}
	s.cells = cellList{src: stream, keys: stream.Keys()}
	if err := s.keepShard(); err != nil {
		return err
	}
	s.total = s.cells.len()
	if s.prev != nil {
		if err := s.resume(); err != nil {
			return err
		}
	}
	if err := s.orderCells(); err != nil {
		return err
	}
	// A slot more than the cells to run would never be used.
	s.slots = s.slots[:min(len(s.slots), max(s.cells.len(), 1))]
	if w := CPUShare(cfg, len(s.slots), o.Self, runtime.NumCPU()); w != "" {
		s.log.Printf("warning: %s", w)
	}
	return nil
}

// checkOrder refuses an order or a prune K that cannot be right. It is the
// one place they are checked, before anything is read.
func (o *SessionOptions) checkOrder() error {
	if o.Order != "" && !slices.Contains(matrix.Orders, o.Order) {
		return configErrorf("--order %q: want one of %s", o.Order, strings.Join(matrix.Orders, ", "))
	}
	if o.PruneAfter != 0 && o.PruneAfter < 2 {
		return configErrorf("--prune-after %d: want at least 2 (cells that differ in every other axis)", o.PruneAfter)
	}
	return nil
}

// MaxSlots is the most slots --slots may ask for: far more cells at once
// than one host serves, and few enough that the slots cost nothing to hold.
const MaxSlots = 1024

// checkSlots refuses a slot count no host could use, before anything is
// read or allocated for it.
func (o *SessionOptions) checkSlots() error {
	if o.Slots < 0 || o.Slots > MaxSlots {
		return configErrorf("--slots %d: want 1 to %d", o.Slots, MaxSlots)
	}
	return nil
}

// orderCells sets the order and pruning options and orders the cells to run.
// It runs after the shard and the resume have picked the cells, and only
// reorders them.
func (s *Session) orderCells() error {
	o := s.opts
	if o.Order != "" {
		s.cfg.Order = o.Order
	}
	switch {
	case o.Confirm:
	case o.Prune || s.cfg.Prune:
		s.prune = cmp.Or(o.PruneAfter, s.cfg.PruneAfter)
	case s.prev != nil && s.prev.Prune > 0:
		s.prune = cmp.Or(o.PruneAfter, s.prev.Prune)
	}
	var blamed []matrix.AxisValue
	if o.Baseline != "" {
		var err error
		if s.baseline, err = record.Load(o.Baseline); err != nil {
			return configErrorf("--baseline %s: %w", o.Baseline, err)
		}
		if o.Blamed != nil {
			blamed = o.Blamed(s.baseline)
		}
	}
	s.cells = orderList(s.cfg, s.cells, s.stream.Reference, s.prior, s.baseline, blamed)
	if s.dedupe() {
		s.cells = autoFirst(s.cells, s.stream.Reference)
	}
	return nil
}

// dedupe says whether cells an auto cell resolved to inherit its verdict.
func (s *Session) version() string {
	if s.opts.Version == nil {
		return ""
	}
	return s.opts.Version()
}

// dedupe is whether the sweep dedupes: asked for, set in the config, or
// set in the run being resumed (a resume keeps it).
func (s *Session) dedupe() bool {
	return s.opts.Dedupe || s.cfg.Dedupe || s.prev != nil && s.prev.Dedupe
}

// keepShard keeps the cells of the shard asked for, or of the resumed run's.
func (s *Session) keepShard() error {
	sh := s.opts.Shard
	if s.prev != nil {
		rec, err := record.ReadShard(s.opts.Resume)
		switch {
		case err != nil:
			return configErrorf("--resume %s: %w", s.opts.Resume, err)
		case rec == nil && !sh.IsZero():
			return configErrorf("--resume %s: the run is not a shard, so --shard %s does not apply", s.opts.Resume, sh)
		case rec != nil && !sh.IsZero() && rec.Shard != sh:
			return configErrorf("--resume %s: the run is shard %s, not %s", s.opts.Resume, rec.Shard, sh)
		case rec != nil:
			sh = rec.Shard
		}
	}
	if sh.IsZero() {
		return nil
	}
	var a matrix.Assignment
	s.cells, a = keepShard(s.cells, s.stream.Reference, sh)
	s.shard = &record.ShardRecord{Shard: sh, Assignment: a}
	return nil
}

// out is the directory the run directory is (or goes) in.
func (s *Session) out() string {
	if s.prev != nil {
		return filepath.Dir(s.opts.Resume)
	}
	return s.opts.Out
}

// check runs the help check (if the config asks for it) and the preflight:
// every problem they find, before any server starts.
func (s *Session) check(ctx context.Context) error {
	if s.cfg.HelpCheck {
		help, err := ServerHelp(ctx, s.cfg, s.opts.Self)
		if err != nil {
			return configErrorf("help_check: %w", err)
		}
		errs, warnings := s.cfg.CheckHelp(help, s.cells, s.opts.Self)
		for _, w := range warnings {
			s.log.Printf("warning: help_check: %s", w)
		}
		if len(errs) > 0 {
			return &ConfigError{Err: prefixed("help_check", errs)}
		}
	}
	if errs := preflight(s.cfg, s.cells.All(), s.slots, s.opts.Self, s.out()); len(errs) > 0 {
		for _, err := range errs {
			if he := (*server.HarnessError)(nil); errors.As(err, &he) {
				return fmt.Errorf("bmx itself failed, before any cell: %w", err) // an infrastructure error, not the config's
			}
		}
		return &ConfigError{Err: prefixed("preflight", errs)}
	}
	return nil
}

// prefixed joins errors one a line, each named for the check that found it.
func prefixed(check string, errs []error) error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = fmt.Errorf("%s: %w", check, e)
	}
	return errors.Join(out...)
}

// open creates the run directory (or takes the resumed one) and, for a new
// run, writes run.json without what takes time to find out (see
// writeRunFirst).
func (s *Session) open(ctx context.Context) (string, *record.Run, error) {
	started := time.Now().UTC()
	run := s.newRun(started)
	var dir string
	if s.prev != nil {
		dir = s.opts.Resume
		run.Started, run.Resumed = s.prev.Started, s.prev.Resumed+1
		run.Notes = append(s.prev.Notes, s.notes...)
		// The earlier attempt's markers are in its run.json; a run.json
		// without one is of a bmx that marked its servers
		// "<directory name>/<cell>#<attempt>".
		prefix := s.prev.Marker
		if prefix == "" {
			prefix = filepath.Base(dir) + "/"
		}
		if n := server.KillMarked(prefix); n > 0 {
			run.Notes = append(run.Notes, fmt.Sprintf("killed %d leftover processes of the earlier attempt", n))
		}
		s.log.Printf("resuming %s: %d cells done, %d to run", dir, len(s.prior), s.cells.len())
	} else {
		var err error
		name := s.cfg.Name
		if s.shard != nil {
			name += fmt.Sprintf("-shard%dof%d", s.shard.Shard.Index, s.shard.Shard.Count)
		}
		if dir, err = record.CreateRunDir(s.opts.Out, name, started); err != nil {
			return "", nil, err
		}
		if err := s.lockDir(dir); err != nil {
			return "", nil, err
		}
		if s.shard != nil {
			if err := record.WriteShard(dir, *s.shard); err != nil {
				return "", nil, fmt.Errorf("write %s: %w", record.ShardFile, err)
			}
		}
		s.log.Printf("sweeping %d cells of %s on %d slot(s) into %s", s.cells.len(), s.cfg.Name, max(len(s.slots), 1), dir)
	}
	run.Marker = server.MarkerPrefix(server.RunMarker(dir)) // as Sweep.Run marks the servers
	if s.prev == nil {
		// run.json now, with the host's basics: the directory is a run
		// (resumable, found by report and by Slurm's requeue) from its
		// start, and one that cannot take run.json fails before any
		// server starts. writeRunFirst completes it.
		run.Host = hostBasics()
		if err := s.writeRun(dir, run); err != nil {
			return "", nil, fmt.Errorf("write run.json: %w", err)
		}
	}
	return dir, run, nil
}

// lockDir takes the run directory's lock for the session (a
// *record.LockedError when another bmx holds it), saying so when it takes
// over the lock of a bmx that died holding it.
func (s *Session) lockDir(dir string) error {
	l, err := record.LockRunDir(dir)
	if err != nil {
		return err
	}
	if l.Stale > 0 {
		s.log.Printf("took over %s from PID %d, a bmx that ended without releasing it", dir, l.Stale)
	}
	s.lock = l
	return nil
}

// sweep runs the cells that are left, into dir.
func (s *Session) sweep(ctx context.Context, dir string, store Recorder, serverStarted func()) ([]record.Result, []string, error) {
	sw := &Sweep{ServerStarted: serverStarted,
		Config: s.cfg, Probes: s.probes, Self: s.opts.Self, Dir: dir, Store: store,
		Slots: s.slots, Reference: s.stream.Reference,
		PruneAfter: s.prune, Evidence: s.prior, StopOnSetup: !s.opts.KeepGoing,
		Dedupe: s.dedupe(), Secrets: s.secrets,
	}
	if p := s.opts.Progress; p != nil {
		p.Begin(s.cells.len(), max(len(s.slots), 1))
		sw.OnStart, sw.OnCell = p.Start, p.Done
	}
	s.watchFirstCorrect(sw)
	results, err := sw.run(ctx, s.cells)
	if s.opts.Progress != nil {
		s.opts.Progress.End()
	}
	return results, sw.Notes(), err
}

// watchFirstCorrect has the log say when the first correct cell of the run
// ends: after how many server starts and how long, and its flags.
func (s *Session) watchFirstCorrect(sw *Sweep) {
	for _, r := range s.prior {
		if r.Verdict == classify.Correct {
			return // found by an earlier attempt
		}
	}
	var (
		mu      sync.Mutex
		started int
		found   bool
	)
	t0 := time.Now()
	onStart, onCell := sw.OnStart, sw.OnCell
	sw.OnStart = func(slot int, cell matrix.Cell) {
		mu.Lock()
		started++
		mu.Unlock()
		if onStart != nil {
			onStart(slot, cell)
		}
	}
	sw.OnCell = func(slot int, r record.Result) {
		if onCell != nil {
			onCell(slot, r)
		}
		mu.Lock()
		defer mu.Unlock()
		if found || r.Verdict != classify.Correct {
			return
		}
		found = true
		flags := matrix.ShellJoin(r.Cell.Args)
		if flags == "" {
			flags = "(no flags of its own)"
		}
		s.log.Printf("first correct cell after %d server start(s), %s (order %s): %s: %s",
			started, time.Since(t0).Round(time.Millisecond), s.cfg.Order, r.Cell.ID, flags)
	}
}

// useBaseline has the run judged against the verified yardstick of the
// --baseline run (or, on a resume without one, of the baseline an earlier
// attempt recorded) where the cells' own agreement leaves them none, and
// records that yardstick in the run directory so reading the run again
// judges it alike.
func (s *Session) useBaseline(dir string, rep *record.Report) error {
	y, err := record.ReadYardstick(dir)
	if err != nil {
		return err
	}
	if s.baseline != nil {
		y = s.baseline.Yardstick()
		if y == nil {
			if a := s.baseline.Agreement; a != nil && (a.Status == classify.NoYardstick || a.Status == classify.Undecided) {
				s.log.Printf("note: --baseline %s: its own cells chose no yardstick (%s): it has no verified answers to judge this run by", s.opts.Baseline, a.Status)
			}
			return nil
		}
		if err := record.WriteYardstick(dir, y); err != nil {
			return fmt.Errorf("write %s: %w", record.BaselineFile, err)
		}
	}
	if used, why := rep.UseBaseline(y); used {
		s.log.Printf("note: the cells chose no yardstick of their own: they are judged against %s", rep.Agreement.Baseline)
	} else if why != "" {
		s.log.Printf("note: the cells chose no yardstick of their own, and the baseline's cannot judge them: %s", why)
	}
	return nil
}

// finish completes run.json, has the report files written and says how the
// run ended. What was recorded stays recorded whatever the error.
func (s *Session) finish(dir string, run *record.Run, results []record.Result, notes []string, sweepErr error) (*Outcome, error) {
	run.Ended = time.Now().UTC()
	run.Interrupted = errors.Is(sweepErr, ErrInterrupted)
	run.Notes = append(run.Notes, notes...)
	var setup *SetupError
	if errors.As(sweepErr, &setup) {
		run.Notes = append(run.Notes, setup.Error())
		run.SetupStop = setup.Cell
	}
	for _, n := range notes {
		s.log.Printf("note: %s", n)
	}
	// The report is of the run as run.json records it: its secrets cut out.
	run = matrix.RedactAll(s.secrets, run)
	rep := record.NewReport(run, append(s.prior, results...))
	rep.Dir = dir
	out := &Outcome{Dir: dir, Report: rep, Baseline: s.baseline}
	writeErr := record.WriteRun(dir, run)
	if writeErr == nil {
		writeErr = s.useBaseline(dir, rep)
	}
	// A run directory removed under the sweep keeps nothing: no message
	// may send the user to it.
	gone := writeErr != nil && RunDirGone(dir)
	switch {
	case gone:
		writeErr = fmt.Errorf("write run.json: the run directory %s was removed during the sweep: nothing of this run is kept", dir)
	case writeErr != nil:
		writeErr = fmt.Errorf("write run.json: %w", writeErr)
	case s.opts.WriteReports != nil:
		writeErr = s.opts.WriteReports(dir, rep)
	}
	switch {
	case sweepErr != nil && !run.Interrupted:
		if gone {
			if !errors.Is(sweepErr, ErrStoreLost) {
				// Whatever failed first (a cell's log that could not be
				// opened, say), the store went with the directory.
				return out, fmt.Errorf("%w: the run directory was removed: nothing of this run is kept (%v)", ErrStoreLost, sweepErr)
			}
			return out, fmt.Errorf("%w (the run directory was removed: nothing of this run is kept)", sweepErr)
		}
		if writeErr != nil {
			s.log.Printf("%v", writeErr)
		}
		if setup != nil { // names the cell's log in dir already
			return out, sweepErr
		}
		return out, fmt.Errorf("%w (results so far are in %s)", sweepErr, dir)
	case writeErr != nil:
		return out, writeErr
	}
	return out, sweepErr
}
