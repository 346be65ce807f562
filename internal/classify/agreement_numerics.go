package classify

import (
	"fmt"
	"math"
	"slices"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// probeSteps are one comparable greedy answer's steps, by probe and request.
type probeSteps struct {
	key   string
	steps []pstep
}

// pstep is a logprob step: its token and its candidates, each token once
// (duplicates merged, as stepKL merges them) with its probability and
// whether it had a number (a NaN logprob has none).
type pstep struct {
	token string
	alts  []palt
}

type palt struct {
	token string
	p     float64
	// lnq is ln of the probability floored at kProbFloor, as term takes
	// it on the cell's side; plnp is p ln p, term's other half.
	lnq, plnp float64
	num       bool
}

// prepare works out a member's step probabilities once.
func prepare(obs []evidence.Observation) ([]probeSteps, map[string]bool) {
	var out []probeSteps
	var forced map[string]bool
	for _, o := range obs {
		if o.Forced != nil && o.Forced.Against != "" {
			if forced == nil {
				forced = map[string]bool{}
			}
			forced[o.Forced.Against] = true
		}
		if !comparable(o) {
			continue
		}
		ps := probeSteps{key: fmt.Sprintf("%s#%d", o.Probe, o.Request), steps: make([]pstep, len(o.Logprobs.Steps))}
		n := 0
		for _, st := range o.Logprobs.Steps {
			n += len(st.Top)
		}
		backing := make([]palt, 0, n) // one allocation for the answer's candidates
		for i, st := range o.Logprobs.Steps {
			ps.steps[i].token = st.Token
			ps.steps[i].alts = backing[len(backing):]
			for j, a := range st.Top {
				if seenBefore(st.Top[:j], a.Token) {
					continue
				}
				p, num := probOf(st.Top, a.Token)
				pa := palt{token: a.Token, p: p, num: num, lnq: math.Log(max(p, kProbFloor))}
				switch {
				case p >= kProbFloor:
					pa.plnp = p * pa.lnq
				case p > 0:
					pa.plnp = p * math.Log(p)
				}
				ps.steps[i].alts = append(ps.steps[i].alts, pa)
			}
			backing = backing[:len(backing)+len(ps.steps[i].alts)]
		}
		out = append(out, ps)
	}
	return out, forced
}

// klPrepared is stepKL on prepared steps, p the reference's.
func klPrepared(p, q pstep) float64 {
	var kl, sp, sq float64
	for _, a := range p.alts {
		for _, b := range q.alts {
			if b.token == a.token {
				if b.num {
					sp += a.p
					sq += b.p
					if a.p > 0 {
						kl += a.plnp - a.p*b.lnq // term(a.p, b.p)
					}
				}
				break
			}
		}
	}
	kl += term(max(0, 1-sp), max(0, 1-sq))
	return max(0, kl)
}

// numericsPrepared is compareWithReference's divergence of m from the
// leader ref on prepared steps: the mean KL over every compared position
// of every request both answered, and how many positions were compared.
func numericsPrepared(ref, m member) (float64, int) {
	// At most most positions are compared; past DegradedKL times that,
	// the mean cannot come back under the floor, and the rest is not read.
	most := 0
	for _, ps := range m.steps {
		if i := slices.IndexFunc(ref.steps, func(r probeSteps) bool { return r.key == ps.key }); i >= 0 {
			most += min(len(ps.steps), len(ref.steps[i].steps))
		}
	}
	var total float64
	n := 0
	for _, ps := range m.steps {
		if total > DegradedKL*float64(most) {
			return total / float64(max(n, 1)), max(n, 1)
		}
		i := slices.IndexFunc(ref.steps, func(r probeSteps) bool { return r.key == ps.key })
		if i < 0 {
			continue
		}
		cell, rs := ps.steps, ref.steps[i].steps
		for j := 0; j < min(len(cell), len(rs)); j++ {
			if len(cell[j].alts) > 0 && len(rs[j].alts) > 0 {
				total += klPrepared(rs[j], cell[j])
				n++
			}
			if cell[j].token != rs[j].token {
				break
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return total / float64(n), n
}
