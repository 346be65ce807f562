package launcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// RunCell runs one attempt of a cell on slot: start its server, wait for it
// to be ready, observe it (the probes, the performance probe, the server
// as it stands when judged), tear it down, judge it. The error is for
// infrastructure failures only (no free port, the log file cannot be
// created); a server that cannot even start is a crashed cell. A server
// that lost its port to another process before binding it starts again on
// another port (runOnFreePort).
func (s *Sweep) RunCell(ctx context.Context, slot string, cell matrix.Cell, attempt int) (record.Result, error) {
	return s.runOnFreePort(ctx, slot, cell, attempt, nil)
}

// runAttempt is RunCell, with answered (if set) called once the server is
// ready and its first probe has returned: the setup works (see pass.loop).
func (s *Sweep) runAttempt(ctx context.Context, slot string, cell matrix.Cell, attempt int, answered func()) (record.Result, error) {
	c := &cellRun{s: s, cfg: s.Config, cell: cell, slot: slot, attempt: attempt, answered: answered}
	c.r = record.Result{Cell: c.s.secrets().Cell(cell), Slot: slot, Started: time.Now().UTC(), Observations: []evidence.Observation{}}
	err := c.run(ctx)
	c.end()
	return c.r, err
}

// cellRun is one attempt of a cell: its record, and what its steps share.
type cellRun struct {
	s       *Sweep
	cfg     *matrix.Config
	cell    matrix.Cell
	slot    string
	attempt int
	r       record.Result
	// argv and env are the server's command and its additions to bmx's
	// environment.
	argv, env []string
	// secrets are the run's, with the secret values of argv and env: they
	// are cut out of the record and the log.
	secrets *matrix.Secrets
	// t0 is when the server started; limit the cell's deadline from then.
	t0    time.Time
	limit time.Duration
	// answered, if set, is called once the server is ready and has
	// answered its first probe.
	answered func()
	// resolved yields what the server resolved its backends to, once it
	// is ready (nil before).
	resolved <-chan map[string]string
}

// run is the cell's sequence, from its port to its verdict.
func (c *cellRun) run(ctx context.Context) error {
	port, err := c.s.ports.Take(c.cfg.Server.Host)
	if err != nil {
		return err
	}
	defer c.s.ports.Release(port)
	log, err := c.prepare(port)
	if err != nil {
		return err
	}
	defer log.Close()
	srv, err := c.start(log, port)
	if err != nil {
		return err
	}
	if srv != nil {
		// The cell's one deadline bounds readiness and probes together;
		// ctx stays the sweep's, so an interrupt is told from a deadline.
		dctx, cancel := context.WithTimeout(ctx, c.limit)
		ready := c.ready(dctx, srv)
		c.observe(ctx, dctx, srv, ready)
		cancel()
		c.teardown(ctx, srv)
		if err := c.harnessFailed(srv); err != nil && ctx.Err() == nil {
			return c.harness(err)
		}
	}
	c.s.judged(&c.r, c.s.reference())
	return nil
}

// HarnessError is a cell that bmx itself failed to run (a
// *server.HarnessError: no file descriptor left, its supervisor killed):
// the server is not to blame, so the cell gets no verdict. It is an
// infrastructure failure: the cell is not recorded, and a resume runs it
// again.
type HarnessError struct {
	Cell string
	Err  error
}

func (e *HarnessError) Error() string {
	return fmt.Sprintf("cell %s: bmx itself failed, not the server (%v): the cell is not recorded, and a resume runs it again", e.Cell, e.Err)
}

func (e *HarnessError) Unwrap() error { return e.Err }

// harnessFailed says how bmx itself failed during the cell (nil: it did
// not): the server's supervisor died under it, or a request could not be
// sent for want of a file descriptor (evidence.Harness).
func (c *cellRun) harnessFailed(srv *server.Server) error {
	if err := srv.Harness(); err != nil {
		return err
	}
	for _, o := range c.r.Observations {
		if o.ErrKind == evidence.Harness {
			return fmt.Errorf("probe %s: %s", o.Probe, o.Err)
		}
	}
	if p := c.r.Perf; p != nil {
		reqs := []evidence.PerfRequest{p.Warmup}
		for _, l := range p.Levels {
			reqs = append(reqs, l.Runs...)
		}
		for _, q := range reqs {
			if q.ErrKind == evidence.Harness {
				return fmt.Errorf("performance probe: %s", q.Err)
			}
		}
	}
	return nil
}

// harness is err as the cell's *HarnessError.
func (c *cellRun) harness(err error) error {
	return &HarnessError{Cell: c.r.Cell.ID, Err: err}
}

// prepare fills in the cell's command line for port and creates its log,
// which starts with the cell, the attempt and the command as a repro.
func (c *cellRun) prepare(port int) (*os.File, error) {
	r := &c.r
	r.Port = port
	c.argv, c.env = c.command(port)
	// What is recorded is redacted; the server gets the real values. What
	// the server prints of them is cut out of the record at the end.
	c.secrets = c.s.secrets().With(matrix.CommandSecrets(c.env, c.argv)...)
	r.Argv, r.Env = c.secrets.Argv(c.argv), c.secrets.Env(c.env)
	r.Repro = Repro(workDir(), r.Env, r.Argv)
	r.LogPath = filepath.Join(c.s.Dir, "logs", record.LogName(c.cell, c.attempt))
	// Mkdir, not MkdirAll: a run directory removed under a running sweep
	// is an infrastructure failure, not something to create again.
	if err := os.Mkdir(filepath.Dir(r.LogPath), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	// Never through a link: one planted where a log goes would have its
	// target overwritten (record.OpenFile).
	log, err := record.OpenFile(r.LogPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600) // as run.json: a log holds the server's env
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	fmt.Fprintf(log, "# bmx: cell %s (attempt %d, slot %q)\n# bmx: %s\n", c.cell.ID, c.attempt, c.slot, r.Repro)
	return log, nil
}

// command is the cell's server command on port, and the environment it
// adds: the cell's, its marker, and the slot's GPUs.
func (c *cellRun) command(port int) (argv, env []string) {
	argv, env = c.cfg.Command(c.cell, matrix.Runtime{Self: c.s.Self, Port: port, GPUs: c.slot})
	env = append(env, server.MarkerEnv+"="+c.marker())
	if c.slot != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+c.slot)
	}
	return argv, env
}

func (c *cellRun) marker() string { return server.CellMarker(c.s.runID(), c.cell.ID, c.attempt) }

// start starts the cell's server; nil when it could not start, which the
// record then says as a crash at start would, unless bmx itself failed to
// start it (the error: see HarnessError).
func (c *cellRun) start(log *os.File, port int) (*server.Server, error) {
	srv, err := server.Start(server.Spec{
		Argv: c.argv, Env: c.env, Marker: c.marker(), Log: log, Host: c.cfg.Server.Host, Port: port,
		ReadyLine: c.cfg.Server.ReadyLog, IsFatal: classify.IsFatal,
	})
	if c.s.ServerStarted != nil {
		c.s.ServerStarted()
	}
	if err != nil {
		fmt.Fprintf(log, "bmx: start server: %v\n", err)
		if he := (*server.HarnessError)(nil); errors.As(err, &he) {
			return nil, c.harness(err)
		}
		c.r.LogTail, _ = server.ReadTail(c.r.LogPath)
		c.r.Problems = append(c.r.Problems, "start server: "+err.Error())
		c.r.Exit = &evidence.Exit{Code: 127} // as a shell reports a command it cannot run
		return nil, nil
	}
	c.t0, c.limit = time.Now(), c.s.cellTimeout()
	return srv, nil
}

// ready waits for the server to be ready within the cell's deadline (ctx)
// and, once it is, asks what it resolved its backends to, beside the
// probes (see resolvedAs).
func (c *cellRun) ready(ctx context.Context, srv *server.Server) server.Ready {
	sc := c.cfg.Server
	ready := srv.WaitReady(ctx, server.Readiness{Health: sc.Health, Timeout: sc.ReadyTimeout, Generates: c.s.generates(srv)})
	if ready.Ready {
		c.r.Timings.ReadyMS = time.Since(c.t0).Milliseconds()
		resolved := make(chan map[string]string, 1)
		c.resolved = resolved
		go func() { resolved <- srv.Resolved(ctx) }()
	}
	return ready
}

// resolvedAs records what the server resolved its backends to, once it
// has said (asked when it was ready, answered beside the probes).
func (c *cellRun) resolvedAs() {
	if c.resolved == nil {
		return
	}
	c.r.Resolved = <-c.resolved
	if c.cell.HasAuto() {
		c.r.Cell.Resolved = c.cfg.ResolvedValues(c.cell, c.r.Resolved)
	}
}

// observe probes a ready server within the cell's deadline (dctx), has it
// score the reference's greedy answers (force), then records the server as
// it stands when judged, before its teardown: the fatal line it logged
// (with the traceback after it), whether and why bmx gave up waiting, a
// hung server's forensics, its exit and its log's tail.
func (c *cellRun) observe(ctx, dctx context.Context, srv *server.Server, ready server.Ready) {
	r := &c.r
	fatal := ready.Fatal
	if ready.Ready {
		if len(c.s.Probes.Probes) == 0 && c.answered != nil {
			c.answered()
		}
		r.Observations, fatal = c.s.probe(dctx, srv, c.answered)
		if fatal == "" && !classify.TimedOut(r.Observations) && srv.Alive() {
			c.s.force(dctx, srv, c.cell, r.Observations)
		}
		r.Timings.ProbesMS = time.Since(c.t0).Milliseconds() - r.Timings.ReadyMS
		c.resolvedAs() // before the performance probe: nothing else in flight
		if fatal == "" && !classify.TimedOut(r.Observations) {
			t := time.Now()
			if r.Perf = c.s.perf(dctx, srv, r); r.Perf != nil {
				r.Timings.PerfMS = time.Since(t).Milliseconds()
			}
		}
	}
	pastDeadline := ctx.Err() == nil && errors.Is(dctx.Err(), context.DeadlineExceeded)
	if pastDeadline {
		r.Problems = append(r.Problems, fmt.Sprintf("the cell's deadline (cell_timeout %s) passed before its probes ended", c.limit))
	} else if ready.TimedOut {
		r.Problems = append(r.Problems, fmt.Sprintf("not ready within the ready timeout (%s)", c.cfg.Server.ReadyTimeout))
	}
	if fatal == "" && ctx.Err() == nil {
		fatal = srv.FatalLine()
	}
	if fatal != "" && srv.Alive() {
		srv.Settle()
		r.Fatal = fatal
	}
	r.TimedOut = ready.TimedOut || pastDeadline || classify.TimedOut(r.Observations)
	if r.TimedOut && srv.Alive() && ctx.Err() == nil {
		r.Forensics = srv.Forensics(ctx, c.s.gpus)
	}
	r.Exit = srv.Exit()
	// The tail is read before teardown: the record is the server as it was
	// judged, not its shutdown messages.
	r.LogTail, _ = srv.Tail()
}

// teardown ends the server and waits until its port and the slot's GPUs
// are free, recording what the teardown found.
func (c *cellRun) teardown(ctx context.Context, srv *server.Server) {
	r := &c.r
	t1 := time.Now()
	stopped := srv.Teardown(c.cfg.Server.StopGrace)
	r.Stop, r.Orphans = stopped.How, stopped.Orphans
	r.Problems = append(r.Problems, stopped.Problems...)
	t2 := time.Now()
	r.Problems = append(r.Problems, c.s.gpus.Released(context.WithoutCancel(ctx), c.slot)...)
	if c.s.gpus != nil {
		r.Timings.GPUWaitMS = time.Since(t2).Milliseconds()
	}
	r.Timings.StopMS = time.Since(t1).Milliseconds()
}

// end cuts the secrets out of the log and the record, and closes the
// record's times.
func (c *cellRun) end() {
	r := &c.r
	if c.secrets.Len() > 0 {
		if err := redactFile(r.LogPath, c.secrets); err != nil {
			r.Problems = append(r.Problems, "redact secrets in the log: "+err.Error())
		}
	}
	r.Ended = time.Now().UTC()
	r.Timings.TotalMS = r.Ended.Sub(r.Started).Milliseconds()
	c.r = matrix.RedactAll(c.secrets, c.r)
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

// redactFile rewrites a log with each secret replaced, line by line, as one
// atomic write: a crash leaves the log with its secrets or without them,
// never half of it.
func redactFile(path string, secrets *matrix.Secrets) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	return record.WriteFileFunc(path, func(out io.Writer) error {
		br := bufio.NewReaderSize(in, 64<<10)
		w := bufio.NewWriterSize(out, 64<<10)
		for {
			line, err := br.ReadString('\n')
			if _, werr := w.WriteString(secrets.Text(line)); werr != nil {
				return werr
			}
			if err == io.EOF {
				return w.Flush()
			}
			if err != nil {
				return err
			}
		}
	})
}

// workDir is bmx's working directory, which a server inherits ("" when it
// cannot be read).
func workDir() string {
	wd, _ := os.Getwd()
	return wd
}

// Repro is the shell command that starts a cell's server by hand: its
// environment additions (bmx's own marker left out) and argv, quoted; when
// an argument or a value names a relative path, it first changes to dir,
// the working directory the server ran in, from which those paths count.
func Repro(dir string, env, argv []string) string {
	var parts []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, server.MarkerEnv+"=") {
			parts = append(parts, kv)
		}
	}
	if len(parts) > 0 {
		parts = append([]string{"env"}, parts...)
	}
	cmd := matrix.ShellJoin(append(parts, argv...))
	if dir != "" && slices.ContainsFunc(append(slices.Clone(argv), parts...), func(a string) bool { return relativePath(dir, a) }) {
		cmd = "cd " + matrix.ShellJoin([]string{dir}) + " && " + cmd
	}
	return cmd
}

// relativePath reports whether a, an argument, a --flag=value or a
// KEY=value, names a path relative to dir: one that looks local
// (matrix.LooksLocal: ./x, a model file's name, ...) or exists there, and
// is neither absolute nor from the home directory.
func relativePath(dir, a string) bool {
	if _, v, ok := strings.Cut(a, "="); ok {
		a = v
	}
	if a == "" || filepath.IsAbs(a) || strings.HasPrefix(a, "~") || strings.HasPrefix(a, "-") || strings.Contains(a, "://") {
		return false
	}
	if matrix.LooksLocal(a) {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, a))
	return err == nil
}
