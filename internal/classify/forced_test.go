package classify

import (
	"math"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// forcedTokens are an answer of twelve tokens about the sea, from which the
// tests make the reference's generated steps and cells' generated and
// forced steps.
var forcedTokens = []string{"The", " sea", " is", " wide", " and", " deep", ",", " and", " full", " of", " fish", "."}

// alt is a candidate with a probability, for building steps.
type alt struct {
	tok string
	p   float64
}

// mkStep is a step choosing tok among cands (probabilities), top-k in the
// order given.
func mkStep(tok string, cands ...alt) evidence.Step {
	st := evidence.Step{Token: tok, Logprob: math.Inf(-1)}
	for _, c := range cands {
		st.Top = append(st.Top, evidence.Alt{Token: c.tok, Logprob: math.Log(c.p)})
		if c.tok == tok {
			st.Logprob = math.Log(c.p)
		}
	}
	if math.IsInf(st.Logprob, -1) {
		st.Logprob = math.Log(1e-4)
	}
	return st
}

// confident is the distribution at a position where the model is sure of
// tok: p for it, the rest on two others.
func confident(tok string, p float64) []alt {
	return []alt{{tok, p}, {" the", (1 - p) * 0.6}, {" a", (1 - p) * 0.3}}
}

// other is the token a model ranks just below the answer's at a near tie.
var other = map[string]string{"The": "A", " sea": " ocean", " wide": " vast"}

// seaSteps are the steps of the reference's answer as a model whose chosen
// token has confidence(i) scores them; tie is the position of a near tie
// between the answer's token and other's (-1: none).
func seaSteps(tie int, confidence func(i int) float64) []evidence.Step {
	var steps []evidence.Step
	for i, tok := range forcedTokens {
		if i == tie {
			steps = append(steps, mkStep(tok, alt{tok, 0.52}, alt{other[tok], 0.46}, alt{" the", 0.01}))
			continue
		}
		steps = append(steps, mkStep(tok, confident(tok, confidence(i))...))
	}
	return steps
}

// tieStep is a cell's numbers at the reference's near tie: they prefer
// the other token, 0.50 against 0.48; it chose chosen.
func tieStep(tie int, chosen string) evidence.Step {
	tok := forcedTokens[tie]
	return mkStep(chosen, alt{other[tok], 0.50}, alt{tok, 0.48}, alt{" the", 0.01})
}

// tieFlipped is a generated answer that took the other token at position
// tie and went on with tokens of its own.
func tieFlipped(tie int, confidence func(i int) float64) []evidence.Step {
	steps := seaSteps(tie, confidence)[:tie]
	steps = append(steps, tieStep(tie, other[forcedTokens[tie]]))
	for _, tok := range []string{" wave", " of", " the", " sea", " is", " calm", "."} {
		steps = append(steps, mkStep(tok, confident(tok, 0.99)...))
	}
	return steps
}

func seaObservation(steps []evidence.Step) evidence.Observation {
	var text strings.Builder
	for _, s := range steps {
		text.WriteString(s.Token)
	}
	n := len(steps)
	return evidence.Observation{Probe: "sea", Kind: evidence.Chat, Prompt: "Write a sentence about the sea.", Expect: &evidence.Expect{Contains: "sea"},
		Text: text.String(), HTTPStatus: 200, FinishReason: "stop", Tokens: &n, Logprobs: &evidence.Logprobs{Tokens: n, Steps: steps}}
}

// TestForcedTieFlip: a cell whose greedy answer parts from the reference's
// at a near tie is judged on the reference's own tokens when its server
// scored them. A healthy cell that flipped a tie at the first token stays
// within the healthy floor over the whole answer (compared over its one
// shared position, the tie alone put it above the floor); a cell whose
// numbers drift after a tie it flipped early exceeds the floor (compared
// over the shared prefix, its drift was never looked at).
func TestForcedTieFlip(t *testing.T) {
	const ref = "moe=a"
	refConf := func(int) float64 { return 0.99 }
	// drifted: sure of every token as the reference is up to the tie,
	// then keeping 0.85 where the reference has 0.99.
	drifted := func(i int) float64 {
		if i <= 3 {
			return 0.99
		}
		return 0.85
	}
	for _, tc := range []struct {
		name string
		tie  int
		conf func(int) float64
		// prefix and forced are the verdicts without and with the forced
		// scoring.
		prefix, forced Verdict
	}{
		{"healthy, tie at token 0", 0, func(i int) float64 { return 0.99 + 0.0001*float64(i%3) }, Degraded, Correct},
		{"drifting, tie at token 3", 3, drifted, Correct, Degraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reference{Cell: ref, Observations: []evidence.Observation{seaObservation(seaSteps(tc.tie, refConf))}}
			cell := seaObservation(tieFlipped(tc.tie, tc.conf))
			prefix := Cell(Input{Observations: []evidence.Observation{cell}, Reference: r})
			if prefix.Verdict != tc.prefix || prefix.Numerics == nil || prefix.Numerics.Forced != 0 {
				t.Fatalf("without forcing: %s (%s), numerics %+v; want %s over the shared prefix", prefix.Verdict, prefix.Reason, prefix.Numerics, tc.prefix)
			}
			if got := prefix.Numerics.Compared; got != tc.tie+1 {
				t.Errorf("without forcing: %d positions compared, want the %d up to the tie", got, tc.tie+1)
			}

			// The cell's server scores the reference's tokens: its own
			// numbers, on the reference's context.
			cell.Forced = &evidence.Forced{Against: ref, Method: "sim", Steps: seaSteps(tc.tie, tc.conf)}
			cell.Forced.Steps[tc.tie] = tieStep(tc.tie, forcedTokens[tc.tie])
			j := Cell(Input{Observations: []evidence.Observation{cell}, Reference: r})
			n := j.Numerics
			if j.Verdict != tc.forced || n == nil {
				t.Fatalf("forced: %s (%s), numerics %+v; want %s", j.Verdict, j.Reason, n, tc.forced)
			}
			p := n.Probes[0]
			if n.Forced != 1 || !p.Forced || p.Method != "sim" || n.Compared != len(forcedTokens) || p.Compared != len(forcedTokens) {
				t.Errorf("forced: numerics %+v, probe %+v; want every one of the %d reference tokens compared, teacher-forced by sim", n, p, len(forcedTokens))
			}
			if p.FirstDiff == nil || *p.FirstDiff != tc.tie {
				t.Errorf("forced: first diff %v, want the greedy paths' parting at %d on record", p.FirstDiff, tc.tie)
			}
			if (n.KL > DegradedKL) != (tc.forced == Degraded) {
				t.Errorf("forced: KL %.3g against the floor %g", n.KL, DegradedKL)
			}
			if tc.forced == Degraded && (!strings.Contains(j.Reason, "teacher-forced") || !strings.Contains(j.Evidence, "teacher-forced")) {
				t.Errorf("forced: the reason or evidence does not say the answer was forced: %q / %q", j.Reason, j.Evidence)
			}
			t.Logf("prefix: %s; forced: %s", prefix.Numerics.Probes[0].figure(), p.figure())
		})
	}
}

// TestForcedIgnored: a forced scoring that failed, that was made against
// another reference, or of a sampled answer is not used; the shared-prefix
// rule judges the probe as before.
func TestForcedIgnored(t *testing.T) {
	conf := func(int) float64 { return 0.99 }
	r := &Reference{Cell: "moe=a", Observations: []evidence.Observation{seaObservation(seaSteps(-1, conf))}}
	temp := float32(0.8)
	for _, tc := range []struct {
		name   string
		forced evidence.Forced
		temp   *float32
	}{
		{"failed", evidence.Forced{Against: "moe=a", Method: "sglang-generate", Err: "HTTP 500: Out of range float values"}, nil},
		{"another reference", evidence.Forced{Against: "moe=b", Method: "sglang-generate", Steps: seaSteps(-1, conf)}, nil},
		{"sampled", evidence.Forced{Against: "moe=a", Method: "sglang-generate", Steps: seaSteps(-1, conf)}, &temp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := seaObservation(seaSteps(-1, conf))
			o.Forced, o.Temperature = &tc.forced, tc.temp
			if _, ok := ForcedNumerics(o, r); ok {
				t.Errorf("ForcedNumerics used %+v", tc.forced)
			}
			n := compareWithReference(Input{Observations: []evidence.Observation{o}, Reference: r})
			if n != nil && n.Forced != 0 {
				t.Errorf("numerics %+v count a forced probe", n)
			}
		})
	}
}

// TestForcedTopHoldsToken: where the cell's server puts the reference's
// token outside its top-k, the forced token's own logprob still counts: a
// cell that finds the reference's answer unlikely is far from it, not at 0.
func TestForcedTopHoldsToken(t *testing.T) {
	ref := []evidence.Step{mkStep(" sea", confident(" sea", 0.99)...)}
	cell := []evidence.Step{{Token: " sea", Logprob: math.Log(1e-4), Top: []evidence.Alt{{Token: "склад", Logprob: math.Log(0.6)}, {Token: "ระ", Logprob: math.Log(0.3)}}}}
	p := compareForced(cell, ref)
	if p.Compared != 1 || p.KL < 5 {
		t.Errorf("forced on a token the cell ranks at 1e-4: %+v, want KL of several nats", p)
	}
	if got := stepKL(ref[0].Top, cell[0].Top); got != 0 {
		t.Errorf("stepKL of disjoint lists is %g: the test's premise changed", got)
	}
}

// TestForcedOtherAnswer: steps forced on another answer than the
// reference's (another run's reference of the same cell ID) are compared
// while the contexts agree: up to and including the first token that
// differs.
func TestForcedOtherAnswer(t *testing.T) {
	conf := func(int) float64 { return 0.99 }
	ref := seaSteps(-1, conf)
	forced := seaSteps(-1, conf)
	forced[4] = mkStep(" or", confident(" or", 0.99)...)
	if p := compareForced(forced, ref); p.Compared != 5 {
		t.Errorf("compared %d positions, want the 4 shared and the first that differs", p.Compared)
	}
}
