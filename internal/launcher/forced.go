package launcher

import (
	"context"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// force has a cell's server score the reference cell's greedy answers,
// teacher-forced (probe.Scorer): each greedy chat answer the cell gave
// gets Forced, the server's logprobs of the reference's tokens for the
// same request, so classify compares the cell's numerics with the
// reference's over the whole answer instead of up to where the greedy
// paths part. It runs after the probes, on a server that answered them;
// the reference itself, and a sweep with no reference (yet), are not
// scored. A scoring that fails is recorded in Forced.Err and changes no
// verdict; one the server cannot give at all leaves Forced nil. It stops
// once the server exits or ctx ends.
func (s *Sweep) force(ctx context.Context, srv *server.Server, cell matrix.Cell, obs []evidence.Observation) {
	ref := s.reference()
	if ref == nil || ref.Cell == cell.ID {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-srv.Exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	probes := make(map[string]probe.Probe, len(s.Probes.Probes))
	for _, p := range s.Probes.Probes {
		probes[p.Name] = p
	}
	type request struct {
		probe string
		i     int
	}
	answers := make(map[request]evidence.Observation, len(ref.Observations))
	for _, ro := range ref.Observations {
		answers[request{ro.Probe, ro.Request}] = ro
	}
	scorer := s.client(srv).Scorer()
	for i := range obs {
		o := &obs[i]
		p, ok := probes[o.Probe]
		ro, found := answers[request{o.Probe, o.Request}]
		if !ok || !found || !probe.Forceable(p, *o, ro) {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		o.Forced = scorer.Score(ctx, p, o.Request, ro, ref.Cell)
	}
}
