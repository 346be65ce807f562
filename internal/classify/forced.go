package classify

import "github.com/bmx-dev/bmx/internal/evidence"

// ForcedNumerics compares a cell's teacher-forced scoring of the reference's
// answer (o.Forced) with the reference's own greedy logprobs of that
// answer: the reference's top-k at each position against the cell's top-k
// at the same position, both conditioned on the same tokens, over every
// token of the answer.
//
// Comparing generated answers (compareSteps) must stop where the greedy
// paths part: after it the two sides condition on different text. So a
// healthy cell that flips a near tie early is compared over a few tokens,
// and a drifting one that happens to flip a tie too escapes with the same
// few; the verdict then hangs on where a tie fell. Forcing scores the
// whole answer on the yardstick's own tokens, so a tie flip moves the
// figure by one position's worth of a near tie, nothing more.
//
// ok is false, and the caller keeps the prefix rule, when there is nothing
// to compare: no reference, not a greedy chat answer, no forced scoring or
// one that failed (Forced.Err), one against another cell than r (a report
// re-judged with another reference), or a reference answer without top-k
// logprobs.
func ForcedNumerics(o evidence.Observation, r *Reference) (ProbeNumerics, bool) {
	f := o.Forced
	if r == nil || !greedy(o) || f == nil || f.Err != "" || len(f.Steps) == 0 || f.Against != r.Cell {
		return ProbeNumerics{}, false
	}
	ro, ok := referenceOf(r, o)
	if !ok {
		return ProbeNumerics{}, false
	}
	p := compareForced(f.Steps, ro.Logprobs.Steps)
	if p.Compared == 0 {
		return ProbeNumerics{}, false
	}
	p.Probe, p.Request, p.Forced, p.Method = o.Probe, o.Request, true, f.Method
	if comparable(o) {
		// Where the cell's own greedy answer parted from the reference's,
		// for the record: the comparison no longer stops there.
		g := compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps)
		p.Tokens, p.FirstDiff = g.Tokens, g.FirstDiff
	} else if o.Logprobs != nil {
		p.Tokens = o.Logprobs.Tokens
	}
	return p, true
}

// compareForced compares the reference's generated steps with a cell's
// forced steps of the same tokens, position by position, over the whole
// answer. A position the cell's server reported no candidates for (a null
// logprob) is not compared. Where the forced tokens are not the reference
// answer's (an answer forced against another run's reference of the same
// cell ID), the positions up to and including the first that differs
// share their context and are compared, and no more.
func compareForced(forced, ref []evidence.Step) ProbeNumerics {
	p := ProbeNumerics{RefTokens: len(ref)}
	var total float64
	for i := 0; i < min(len(forced), len(ref)); i++ {
		if len(forced[i].Top) > 0 && len(ref[i].Top) > 0 {
			kl := stepKL(ref[i].Top, forcedTop(forced[i]))
			total += kl
			p.MaxKL = max(p.MaxKL, kl)
			p.Compared++
		}
		if forced[i].Token != ref[i].Token {
			break
		}
	}
	if p.Compared > 0 {
		p.KL = total / float64(p.Compared)
	}
	return p
}

// forcedTop is a forced step's candidates with the forced token among them:
// the server gave its logprob of that token even where it is outside its
// top-k, and without it a cell that finds the reference's token unlikely
// would share no candidate with the reference there, and stepKL of two
// disjoint lists is 0 (all the mass is in "everything else" on both sides).
func forcedTop(st evidence.Step) []evidence.Alt {
	for _, a := range st.Top {
		if a.Token == st.Token {
			return st.Top
		}
	}
	return append(st.Top[:len(st.Top):len(st.Top)], evidence.Alt{Token: st.Token, Logprob: st.Logprob})
}
