package server

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Readiness is polled every firstPoll while the server refuses connections
// (a bare connect, see listening) for up to firstPollFor (a refused
// connection costs the server nothing and writes nothing in its log, and a
// sim or a tiny model binds its port within it), every fastPoll until
// fastPollFor (a server that answers /health 503 while it warms up logs
// each poll), then every pollInterval.
const (
	// firstPoll finds an instant server ready within 2 ms of its bind (1
	// ms on average, where 5 ms polls cost 2.5: a sixth of bmx's own time
	// a cell against a sim).
	firstPoll    = 2 * time.Millisecond
	firstPollFor = 2 * time.Second
	// fastPoll finds a quick server ready within 5 ms.
	fastPoll = 5 * time.Millisecond
	// fastPollFor covers a sim, a CPU engine or a small model (3000 polls
	// at most); a real model that is still loading after 15 s takes
	// minutes anyway.
	fastPollFor = 15 * time.Second
	// pollInterval adds at most 100 ms to a start that takes minutes.
	pollInterval = 100 * time.Millisecond
)

// pollEvery is the readiness poll's interval at since after the start,
// answered telling whether the server has taken a connection.
func pollEvery(since time.Duration, answered bool) time.Duration {
	switch {
	case since < firstPollFor && !answered:
		return firstPoll
	case since < fastPollFor:
		return fastPoll
	}
	return pollInterval
}

// healthTimeout bounds one readiness poll: a server that takes longer to
// answer /health is busy loading, and the next poll asks again.
const healthTimeout = 2 * time.Second

// healthBodyMax is read of a /health reply (to reuse the connection).
const healthBodyMax = 64 << 10

// Readiness says when a started server is ready to be probed.
type Readiness struct {
	// Health is the path that answers 200 once the server is up.
	Health string
	// Timeout bounds the wait.
	Timeout time.Duration
	// Generates, if set, must also succeed: a one-token generation that
	// proves an SGLang-style server can serve, not only answer /health.
	Generates func(ctx context.Context) bool
}

// Ready is how the wait for readiness ended: the server is Ready, or the
// wait TimedOut, or the log showed a Fatal line; none of them when the
// process exited or ctx ended.
type Ready struct {
	Ready, TimedOut bool
	Fatal           string
}

// WaitReady polls the health path until it answers 200 (and the ready log
// line has appeared, and a generation succeeds, when asked for), the
// process exits, a fatal line is logged, the ready timeout passes or ctx
// ends.
func (s *Server) WaitReady(ctx context.Context, r Readiness) Ready {
	deadline := time.NewTimer(r.Timeout)
	defer deadline.Stop()
	t0 := time.Now()
	tick := time.NewTimer(firstPoll)
	defer tick.Stop()
	client := s.Client(healthTimeout)
	answered := false
	for {
		// Until the server first takes a connection, a bare connect
		// stands for the poll: a refused one costs three system calls,
		// where a refused HTTP request's dial and transport cost five
		// times the CPU (most of bmx's own in a sweep of quick servers).
		answered = answered || listening(s.spec.Host, s.spec.Port)
		ok := answered && healthy(ctx, client, s.URL()+r.Health)
		tick.Reset(pollEvery(time.Since(t0), answered))
		if ok && isClosed(s.watch.ready) && (r.Generates == nil || r.Generates(ctx)) {
			return Ready{Ready: true}
		}
		select {
		case <-s.proc.exited:
			return Ready{}
		case line := <-s.watch.fatal:
			return Ready{Fatal: line}
		case <-deadline.C:
			return Ready{TimedOut: true}
		case <-ctx.Done():
			return Ready{}
		case <-tick.C:
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// healthy polls url once: whether it answers 200.
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
