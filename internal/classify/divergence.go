package classify

import (
	"fmt"
	"math"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// DegradedKL is the divergence from the reference cell, in nats per token,
// above which a cell whose probes all pass is degraded: its numerics part
// from the reference's by more than healthy backends differ by.
//
// Calibrated on two real engines, three story probes of 96 greedy tokens
// from the trained stories260K model with top-5 logprobs.
//
// llama.cpp on CPU (examples/llamacpp, node-llama-cpp 3.21.1), against the
// f16 K/V cache without flash attention:
//
//	healthy  f32 K cache, flash attention on or off     0.000001 nats/token, same 288 tokens
//	healthy  f16 K cache, flash attention on            0.000001, same 288 tokens
//	healthy  bf16 K cache, flash attention on or off    0.000035, 231 tokens, first difference at 38
//	garbage  q8_0 or q4_0 K cache, flash attention off  0.17, 13 tokens, first difference at 0
//
// torch 2.11 on an H200 (examples/torch-gpu/h200), against math attention,
// float32, dense GEMMs:
//
//	healthy  float32 efficient attention                0.000000000001, same 288 tokens
//	healthy  float16, any attention, dense              0.0000043
//	healthy  bfloat16, any attention, dense             0.00021 to 0.00027
//	numerics fp8 GEMM (per-tensor scales), any dtype    0.0050 to 0.0057, first difference at 0 to 25
//
// torch 2.11 on an H100 (examples/torch-gpu/h100-issue36, the MoE example,
// naive and triton runners), against the naive runner, float32, dense
// GEMMs, each cell scored on the reference's own 288 tokens
// (teacher-forced, the vLLM request shape of the example server) and, for
// comparison, over the shared greedy prefix as before:
//
//	                                                  teacher-forced        shared prefix
//	healthy  float32 triton, float16 naive or triton  0.000031 to 0.000054  0.0000087 to 0.000042
//	healthy  bfloat16 naive or triton                 0.00049 to 0.00054    0.00052 to 0.00056
//	numerics fp8 GEMM, float32 or bfloat16            0.0026 to 0.0030      0.0020 to 0.0027, over 35 to 81 tokens
//	garbage  top-k weights not renormalised           0.26                  0.80, over 6 tokens
//
// Over the shared prefix a tie that healthy numerics flip early (at token 2
// of one probe, in most of these cells) cuts the comparison short: the
// triton bfloat16 fp8 cell scored 0.00197 over 35 tokens, under the 0.002
// the floor was before, and read correct. Scored on the reference's tokens
// every fp8 cell is at or above 0.0026 and every healthy one at or below
// 0.00054. The floor is their geometric mean, 0.0012: 2.2 times above the
// worst healthy cell and 2.2 times below the gentlest fp8 GEMM scored so,
// and still 4.4 and 4 times from the prefix figures of the H200 (healthy
// 0.00027 at most, fp8 0.005 at least), 1.6 times from the H100's prefix
// fp8 cell above, 140 times below the broken caches. In words, 0.0012 nats
// per token is the chosen token's probability falling from 0.99 to about
// 0.9875 at every step: text still reads right, the model is measurably
// not the reference's.
const DegradedKL = 0.0012

// brokenKL is the divergence over a probe's shared prefix beyond which the
// numerics are not a near miss: no parting of greedy paths there is a tie
// that healthy numerics flipped. It lies above every fp8 probe measured
// (0.017 at most) and below the broken llama.cpp caches (0.17).
const brokenKL = 0.05

// pathSignature groups cells whose greedy answers took another path at a
// near tie.
const pathSignature = "greedy path parts from the reference cell at a near tie"

// kProbFloor stands in for a probability that underflows or is missing on
// one side, so one term cannot be infinite: it caps a token's contribution
// at p*ln(p/1e-9), about 21 nats for p=1.
const kProbFloor = 1e-9

// numericsSignature groups degraded cells in a report's causes.
const numericsSignature = "top-k logprobs diverge from the reference cell"

// Numerics is how a cell's greedy logprobs compare with the reference
// cell's, per probe and for the whole cell.
type Numerics struct {
	// Reference is the reference cell's ID.
	Reference string `json:"reference"`
	// KL is the divergence estimate in nats per token, averaged over every
	// compared position of every probe (see stepKL).
	KL float64 `json:"kl"`
	// MaxKL is the largest divergence at any one position.
	MaxKL float64 `json:"max_kl"`
	// Compared counts the positions compared, all probes together.
	Compared int `json:"compared"`
	// FirstDiff is the earliest position (0-based, in tokens) at which a
	// probe's greedy tokens differ from the reference's; nil when every
	// probe generated exactly the reference's tokens.
	FirstDiff *int `json:"first_diff,omitempty"`
	// Threshold is DegradedKL when the cell was judged.
	Threshold float64 `json:"threshold"`
	// Forced counts the probes compared on the reference's own tokens
	// (teacher-forced, see ForcedNumerics); the others were compared over
	// their shared greedy prefix.
	Forced int `json:"forced,omitempty"`
	// Probes are the figures of each compared request.
	Probes []ProbeNumerics `json:"probes"`
}

// ProbeNumerics compares one greedy request with the reference's.
type ProbeNumerics struct {
	Probe   string `json:"probe"`
	Request int    `json:"request,omitempty"`
	// Tokens and RefTokens are the generated tokens on each side.
	Tokens    int `json:"tokens"`
	RefTokens int `json:"ref_tokens"`
	// FirstDiff is the first position whose token differs (or where one
	// side stopped and the other went on); nil when the tokens are equal.
	FirstDiff *int `json:"first_diff,omitempty"`
	// Compared counts the positions compared: every token of the
	// reference's answer when Forced, else the shared greedy prefix and
	// the first differing position, whose context is still shared.
	Compared int     `json:"compared"`
	KL       float64 `json:"kl"`
	MaxKL    float64 `json:"max_kl"`
	// Forced is set when the cell's server scored the reference's own
	// tokens (teacher forcing), so every position was compared on the same
	// context; Method is how the server was asked (evidence.Forced.Method).
	Forced bool   `json:"forced,omitempty"`
	Method string `json:"method,omitempty"`
}

// compareNumerics sets j.Numerics when the cell and the reference both have
// top-k logprobs of some greedy probe, and turns a correct cell degraded
// when their divergence exceeds DegradedKL. It changes no other verdict:
// a cell that already fails has a worse verdict than numbers can give it.
func compareNumerics(j *Judgement, in Input) {
	n := compareWithReference(in)
	if n == nil {
		return
	}
	j.Numerics = n
	if j.Verdict != Correct || n.Compared == 0 || n.KL <= DegradedKL {
		return
	}
	j.Verdict, j.Signature = Degraded, numericsSignature
	// The figure leads: a terminal table shows a reason's first 70 runes.
	diff := "same greedy tokens"
	if n.FirstDiff != nil {
		diff = fmt.Sprintf("first differing token at %d", *n.FirstDiff)
	}
	over := fmt.Sprintf("%d tokens", n.Compared)
	switch {
	case n.Forced == len(n.Probes):
		over = fmt.Sprintf("%d of the reference's own tokens (teacher-forced)", n.Compared)
	case n.Forced > 0:
		over = fmt.Sprintf("%d tokens (%d of %d probes teacher-forced)", n.Compared, n.Forced, len(n.Probes))
	}
	j.Reason = fmt.Sprintf("numerics diverge: KL %.3g nats/token (threshold %g) over %s against the reference cell %s, %s; the answers pass (%s)",
		n.KL, DegradedKL, over, n.Reference, diff, j.Reason)
	worst := n.Probes[0]
	for _, p := range n.Probes[1:] {
		if p.KL*float64(p.Compared) > worst.KL*float64(worst.Compared) {
			worst = p
		}
	}
	j.Evidence = fmt.Sprintf("%s: %s", worst.Probe, worst.figure())
}

// figure is the summary a reason quotes: "KL 0.21 nats/token over 96
// tokens, first differing token at 12".
func (n *Numerics) figure() string {
	return numericsFigure(n.KL, n.Compared, n.FirstDiff)
}

func (p ProbeNumerics) figure() string {
	s := numericsFigure(p.KL, p.Compared, p.FirstDiff)
	if p.Forced {
		s += ", scored on the reference's tokens (teacher-forced)"
	}
	return s
}

func numericsFigure(kl float64, compared int, firstDiff *int) string {
	s := fmt.Sprintf("KL %.3g nats/token over %d tokens", kl, compared)
	if firstDiff != nil {
		return s + fmt.Sprintf(", first differing token at %d", *firstDiff)
	}
	return s + ", same greedy tokens"
}

// compareWithReference compares a cell's greedy top-k logprobs with the
// reference cell's; nil without a reference or without top-k logprobs of
// the same greedy probe on both sides. A probe whose server scored the
// reference's answer (teacher-forced, against this very reference) is
// compared over every token of that answer; any other over the shared
// greedy prefix (compareSteps), as before forcing.
func compareWithReference(in Input) *Numerics {
	if in.Reference == nil {
		return nil
	}
	n := &Numerics{Reference: in.Reference.Cell, Threshold: DegradedKL, Probes: []ProbeNumerics{}}
	var total float64
	for _, o := range in.Observations {
		p, ok := ForcedNumerics(o, in.Reference)
		if ok {
			n.Forced++
		} else {
			if !comparable(o) {
				continue
			}
			ro, ok := referenceOf(in.Reference, o)
			if !ok {
				continue
			}
			p = compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps)
			p.Probe, p.Request = o.Probe, o.Request
		}
		n.Probes = append(n.Probes, p)
		n.Compared += p.Compared
		total += p.KL * float64(p.Compared)
		n.MaxKL = max(n.MaxKL, p.MaxKL)
		if p.FirstDiff != nil && (n.FirstDiff == nil || *p.FirstDiff < *n.FirstDiff) {
			d := *p.FirstDiff
			n.FirstDiff = &d
		}
	}
	if len(n.Probes) == 0 {
		return nil
	}
	if n.Compared > 0 {
		n.KL = total / float64(n.Compared)
	}
	return n
}

// comparable reports a greedy chat answer with top-k logprobs.
func comparable(o evidence.Observation) bool {
	return greedy(o) && o.Logprobs != nil && len(o.Logprobs.Steps) > 0
}

// referenceOf is the reference cell's comparable answer to the same request.
func referenceOf(r *Reference, o evidence.Observation) (evidence.Observation, bool) {
	for _, ro := range r.Observations {
		if ro.Probe == o.Probe && ro.Request == o.Request {
			return ro, comparable(ro)
		}
	}
	return evidence.Observation{}, false
}

// compareSteps walks two greedy answers token by token. Position i's
// distribution is conditioned on the tokens before it, so it can be
// compared while those agree: over the shared prefix and at the first
// position whose chosen tokens differ, and no further. A position without
// candidates on either side (a null logprob) is not compared.
func compareSteps(cell, ref []evidence.Step) ProbeNumerics {
	p := ProbeNumerics{Tokens: len(cell), RefTokens: len(ref)}
	var total float64
	for i := 0; i < min(len(cell), len(ref)); i++ {
		if len(cell[i].Top) > 0 && len(ref[i].Top) > 0 {
			kl := stepKL(ref[i].Top, cell[i].Top)
			total += kl
			p.MaxKL = max(p.MaxKL, kl)
			p.Compared++
		}
		if cell[i].Token != ref[i].Token {
			d := i
			p.FirstDiff = &d
			break
		}
	}
	if p.FirstDiff == nil && len(cell) != len(ref) {
		d := min(len(cell), len(ref))
		p.FirstDiff = &d
	}
	if p.Compared > 0 {
		p.KL = total / float64(p.Compared)
	}
	return p
}

// stepKL estimates KL(P||Q) in nats at one position, P the reference's
// next-token distribution and Q the cell's, from the top-k candidates each
// server reported.
//
// The estimator: let S be the tokens in both top-k lists. Partition the
// vocabulary into S's tokens, one by one, and "everything else", and take
// the KL of the two distributions over that partition:
//
//	sum over s in S of p(s) ln(p(s)/q(s))  +  p(R) ln(p(R)/q(R)),
//	p(R) = 1 - sum over S of p(s), q(R) likewise.
//
// Why this one:
//   - Merging outcomes never increases a KL (the data-processing
//     inequality), so this is a lower bound of the true divergence: a
//     truncated top-k cannot make a healthy cell look worse than it is,
//     and the threshold errs toward calling a cell correct.
//   - It is exact when the top-k hold all the mass, which they nearly do at
//     a greedy step of a working model.
//   - Unlike renormalising over S alone, the "everything else" bucket keeps
//     mass that moved off the shared tokens: a cell whose chosen token fell
//     from 0.95 to 0.60 with the rest spread over tokens outside the
//     reference's top-k still scores, where a renormalised estimate over
//     S = {chosen token} would say 0.
//   - Direction P||Q (reference first) weighs each difference by how
//     likely the reference finds the token: it asks how surprised the
//     reference's model would be by the cell's numbers where it matters,
//     and the tokens the reference finds unlikely cannot dominate.
//
// Tokens are matched by their text; duplicates within a list (two ids with
// the same text) are merged, which is again a coarsening. Probabilities
// below kProbFloor are raised to it, so one term stays finite.
func stepKL(p, q []evidence.Alt) float64 {
	// Top-k lists are short (20 at most from an OpenAI API): scanning them
	// costs less than building maps, which dominated agreement among ten
	// thousand cells.
	var kl, sp, sq float64
	for i, a := range p { // in list order, so the sum is deterministic
		if seenBefore(p[:i], a.Token) {
			continue
		}
		qv, ok := probOf(q, a.Token)
		if !ok {
			continue
		}
		pv, _ := probOf(p, a.Token)
		sp += pv
		sq += qv
		kl += term(pv, qv)
	}
	kl += term(max(0, 1-sp), max(0, 1-sq))
	return max(0, kl)
}

// seenBefore reports whether tok is among alts.
func seenBefore(alts []evidence.Alt, tok string) bool {
	for _, a := range alts {
		if a.Token == tok {
			return true
		}
	}
	return false
}

// probOf is the probability of tok among alts, duplicates (two ids with
// one text) merged, NaN logprobs left out; ok is false when alts do not
// hold tok with a number.
func probOf(alts []evidence.Alt, tok string) (float64, bool) {
	var p float64
	ok := false
	for _, a := range alts {
		if a.Token == tok && !math.IsNaN(a.Logprob) {
			p += math.Exp(min(a.Logprob, 0))
			ok = true
		}
	}
	return p, ok
}

// term is p ln(p/q), 0 for p=0, with q floored.
func term(p, q float64) float64 {
	if p <= 0 {
		return 0
	}
	return p * math.Log(p/max(q, kProbFloor))
}

// probs turns candidates' logprobs into probabilities by token text.
func probs(alts []evidence.Alt) map[string]float64 {
	m := make(map[string]float64, len(alts))
	for _, a := range alts {
		if math.IsNaN(a.Logprob) {
			continue
		}
		m[a.Token] += math.Exp(min(a.Logprob, 0))
	}
	return m
}
