// Package launcher owns the sweep loop and one server's life: it starts the
// server of each cell in its own process group with its output going to the
// cell's log file, waits for readiness while watching for the process's exit
// and the ready timeout, runs the probes, and tears the whole group down
// (SIGTERM, a grace period, SIGKILL) until its port is free again.
//
// It records what happened and hands the record to the classifier; it never
// judges text itself. A failed cell is data: only infrastructure errors (the
// run directory cannot be written) stop a sweep.
package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/launcher/probe"
	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/reports"
)

// PollInterval is how often readiness is checked.
const PollInterval = 100 * time.Millisecond

// dyingWait is how long bmx waits for a server whose connections failed to
// finish dying, so its exit and last log lines are part of the record.
const dyingWait = 3 * time.Second

// Sweep runs every cell of the plan in order and records each result in the
// store as soon as the cell ends.
type Sweep struct {
	Config *matrix.Config
	Probes probe.Set
	// Self is the bmx executable, for {self} in commands.
	Self string
	// Dir is the run directory; logs go to Dir/logs.
	Dir   string
	Store *reports.Store
	// OnStart and OnCell, if set, are told when a cell starts and ends
	// (progress output).
	OnStart func(i, n int, cell matrix.Cell)
	OnCell  func(i, n int, r reports.Result)
}

// ErrInterrupted is returned when ctx was cancelled during a sweep; the cells
// finished until then are in the store.
var ErrInterrupted = errors.New("sweep interrupted")

// Run sweeps the cells. It returns the finished results; the error is
// ErrInterrupted or an infrastructure failure, never a failed cell.
func (s *Sweep) Run(ctx context.Context, cells []matrix.Cell) ([]reports.Result, error) {
	if err := os.MkdirAll(filepath.Join(s.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	var results []reports.Result
	for i, cell := range cells {
		if ctx.Err() != nil {
			return results, ErrInterrupted
		}
		if s.OnStart != nil {
			s.OnStart(i, len(cells), cell)
		}
		r, err := s.RunCell(ctx, cell)
		if err != nil {
			return results, err
		}
		if ctx.Err() != nil {
			// The cell was cut short by the interrupt: its verdict would
			// describe bmx, not the backend, so it is not recorded.
			return results, ErrInterrupted
		}
		if err := s.Store.Append(r); err != nil {
			return results, err
		}
		results = append(results, r)
		if s.OnCell != nil {
			s.OnCell(i, len(cells), r)
		}
	}
	return results, nil
}

// LogName is the log file name of a cell: its ID with characters that are
// awkward in file names replaced.
func LogName(cell matrix.Cell) string {
	name := logNameRe.ReplaceAllString(cell.ID, "_")
	if name == "" {
		name = "cell"
	}
	return name + ".log"
}

var logNameRe = regexp.MustCompile(`[^A-Za-z0-9_.,=+-]`)

// RunCell starts one cell's server, probes it, stops it and judges it. The
// error is for infrastructure failures only (the log file cannot be
// created); a server that cannot even start is a crashed cell.
func (s *Sweep) RunCell(ctx context.Context, cell matrix.Cell) (r reports.Result, err error) {
	cfg := s.Config
	r = reports.Result{Cell: cell, Started: time.Now().UTC(), Observations: []probe.Observation{}}
	defer func() {
		r.Ended = time.Now().UTC()
		r.Timings.TotalMS = r.Ended.Sub(r.Started).Milliseconds()
	}()
	port, err := freePort(cfg.Server.Host)
	if err != nil {
		return r, err
	}
	r.Port = port
	argv, env := cfg.Command(cell, matrix.Runtime{Self: s.Self, Port: port})
	r.Argv, r.Env = argv, env
	r.LogPath = filepath.Join(s.Dir, "logs", LogName(cell))
	logf, err := os.Create(r.LogPath)
	if err != nil {
		return r, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# bmx: cell %s\n# bmx: argv %s\n", cell.ID, matrix.ShellJoin(argv))

	srv, err := start(argv, processEnv(env), logf)
	if err != nil {
		// Nothing ran: the record says why, as a crash at start would.
		fmt.Fprintf(logf, "bmx: start server: %v\n", err)
		r.LogTail, _ = readTail(r.LogPath)
		r.Problems = append(r.Problems, "start server: "+err.Error())
		r.Exit = &classify.Exit{Code: 127} // as a shell reports a command it cannot run
		r.Judge()
		return r, nil
	}

	base := "http://" + hostPort(cfg.Server.Host, port)
	t0 := time.Now()
	ready, timedOut := s.waitReady(ctx, srv, base)
	if ready {
		r.Timings.ReadyMS = time.Since(t0).Milliseconds()
		r.Resolved = resolvedBackends(ctx, base)
		r.Observations = s.probe(ctx, srv, base)
		r.Timings.ProbesMS = time.Since(t0).Milliseconds() - r.Timings.ReadyMS
		for _, o := range r.Observations {
			if o.ErrKind == probe.ErrTimeout {
				timedOut = true
			}
		}
	}
	r.TimedOut = timedOut
	if timedOut && !ready {
		r.Problems = append(r.Problems, fmt.Sprintf("not ready within the ready timeout (%s)", cfg.Server.ReadyTimeout))
	}
	r.Exit = srv.exit()
	// The tail is read before teardown: the record is the server as it was
	// judged, not its shutdown messages.
	r.LogTail, _ = readTail(r.LogPath)

	t1 := time.Now()
	r.Stop = srv.stop(cfg.Server.StopGrace)
	if err := waitPortFree(cfg.Server.Host, port, 5*time.Second); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Timings.StopMS = time.Since(t1).Milliseconds()
	r.Judge()
	return r, nil
}

// waitReady polls the health path until it answers 200 (and the ready log
// line, if configured, has appeared), the process exits, the ready timeout
// passes or ctx is cancelled. It reports readiness and whether it timed out.
func (s *Sweep) waitReady(ctx context.Context, srv *server, base string) (ready, timedOut bool) {
	cfg := s.Config.Server
	deadline := time.NewTimer(cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	follow := &follower{path: srv.cmd.Stdout.(*os.File).Name(), re: cfg.ReadyLog}
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if healthy(ctx, client, base+cfg.Health) && (cfg.ReadyLog == nil || follow.poll()) {
			return true, false
		}
		select {
		case <-srv.exited:
			return false, false
		case <-deadline.C:
			return false, true
		case <-ctx.Done():
			return false, false
		case <-tick.C:
		}
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
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// probe runs the probe set; requests stop as soon as the server process
// exits. If connections failed, it gives a dying server a moment to finish
// dying so that its exit is on record.
func (s *Sweep) probe(ctx context.Context, srv *server, base string) []probe.Observation {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-srv.exited:
			cancel()
		case <-pctx.Done():
		}
	}()
	client := &probe.Client{BaseURL: base, Model: s.Config.Probes.Model, Timeout: s.Config.Server.ProbeTimeout}
	obs := client.Run(pctx, s.Probes)
	for _, o := range obs {
		if o.ErrKind == probe.ErrConnection || o.ErrKind == probe.ErrAborted || o.HTTPStatus >= 500 {
			t := time.NewTimer(dyingWait)
			select {
			case <-srv.exited:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			break
		}
	}
	return obs
}

// resolvedBackends reads what the server resolved its backends to (SGLang's
// /get_server_info); nil when the server does not say.
func resolvedBackends(ctx context.Context, base string) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
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
	if json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&info) != nil {
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

// processEnv is bmx's environment plus the cell's additions. Python output
// is made unbuffered so the log is complete up to the moment a server dies.
func processEnv(add []string) []string {
	env := os.Environ()
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
