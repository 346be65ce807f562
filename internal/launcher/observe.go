package launcher

import (
	"context"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/record"
)

// dyingWait is how long bmx waits for a server whose connections failed to
// finish dying, so its exit and last log lines are part of the record: a
// Python server that lost its scheduler prints its traceback and exits within
// a second or two; one that takes longer is judged as it stands.
const dyingWait = 3 * time.Second

// readyGenerateTimeout bounds the one-token generation that proves an
// SGLang-style server ready: the first request may compile kernels or
// capture a CUDA graph, which takes seconds, not minutes.
const readyGenerateTimeout = 30 * time.Second

// generates is the one-token generation check of readiness for srv, when
// the config asks for it (nil: none).
func (s *Sweep) generates(srv *server.Server) func(ctx context.Context) bool {
	if !s.Config.Server.ReadyGenerate {
		return nil
	}
	return func(ctx context.Context) bool {
		c := s.client(srv)
		c.Timeout = readyGenerateTimeout
		return c.Generate(ctx) == nil
	}
}

// client is the probe client for a cell's server, on its connections.
func (s *Sweep) client(srv *server.Server) *probe.Client {
	return &probe.Client{BaseURL: srv.URL(), Model: s.Config.Probes.Model, Timeout: s.Config.Server.ProbeTimeout, Engine: s.Config.Engine, HTTP: srv.Client(0)}
}

// probe runs the probe set (runUntilTimeout); requests stop as soon as the
// server process exits or logs a fatal line, which it returns. answered, if
// set, is called once the first probe has returned.
func (s *Sweep) probe(ctx context.Context, srv *server.Server, answered func()) ([]evidence.Observation, string) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fatalCh := make(chan string, 1)
	go func() {
		select {
		case <-srv.Exited():
			cancel()
		case line := <-srv.Fatal():
			fatalCh <- line
			cancel()
		case <-pctx.Done():
		}
	}()
	obs := runUntilTimeout(pctx, s.client(srv), s.Probes, answered)
	cancel()
	select {
	case line := <-fatalCh:
		return obs, line
	default:
	}
	for _, o := range obs {
		if o.ErrKind == evidence.Connection || o.HTTPStatus >= 500 {
			return obs, awaitDeath(ctx, srv)
		}
	}
	return obs, ""
}

// runUntilTimeout sends set's probes one at a time (a probe's own requests
// together) and stops at the first probe that times out: the server is then
// a hang, whatever it answered before. The probes after it are recorded as
// not sent, since each would wait out its own timeout against a server that
// has stopped answering, and no answer could make the verdict better than a
// hang. answered, if set, is called once the first probe has returned.
func runUntilTimeout(ctx context.Context, client *probe.Client, set probe.Set, answered func()) []evidence.Observation {
	var obs []evidence.Observation
	for i, p := range set.Probes {
		obs = append(obs, client.Run(ctx, probe.Set{Name: set.Name, Probes: []probe.Probe{p}})...)
		if i == 0 && answered != nil {
			answered()
		}
		if classify.TimedOut(obs) {
			return append(obs, notSent(set.Probes[i+1:], whyNotSent(obs))...)
		}
	}
	return obs
}

// awaitDeath gives a server whose connections failed a moment to finish
// dying, so that its exit is on record; it returns the fatal line it logs
// meanwhile.
func awaitDeath(ctx context.Context, srv *server.Server) string {
	t := time.NewTimer(dyingWait)
	defer t.Stop()
	select {
	case <-srv.Exited():
	case line := <-srv.Fatal():
		return line
	case <-t.C:
	case <-ctx.Done():
	}
	return ""
}

// whyNotSent says why the probes after a timed-out one were not sent: the
// server never generated (up, but its generation hangs), or it answered
// before and then stopped answering (wedged while serving).
func whyNotSent(obs []evidence.Observation) string {
	for _, o := range obs {
		if o.Kind != evidence.ModelInfo && (o.Text != "" || o.Reasoning != "" || (o.Tokens != nil && *o.Tokens > 0)) {
			return "not sent: an earlier probe timed out after the server had answered (it stopped answering)"
		}
	}
	return "not sent: an earlier probe timed out and the server had generated nothing"
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

// perf measures serving speed on a cell whose answers are correct (or
// degraded), while its server is still up: the performance probe of the
// probe set, stopped if the server dies.
func (s *Sweep) perf(ctx context.Context, srv *server.Server, r *record.Result) *evidence.Perf {
	if !s.Probes.Perf.Enabled {
		return nil
	}
	pre := *r
	s.judged(&pre, s.reference())
	if pre.Verdict != classify.Correct && pre.Verdict != classify.Degraded {
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// A fatal line is left to the watcher's reader: a server that goes
		// down under the load is judged as it ends.
		select {
		case <-srv.Exited():
		case <-pctx.Done():
		}
		cancel()
	}()
	return s.client(srv).Perf(pctx, s.Probes.Perf)
}
