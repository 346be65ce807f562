package sim

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
)

// maxTopLogprobs is the most candidates per token the sim reports.
const maxTopLogprobs = 20

// driftKeep is the share of the chosen token's probability a drifting
// backend keeps; the rest goes to the other candidates. The chosen token
// stays the most likely, so greedy answers do not change, but the
// distributions part from a healthy backend's by 0.1 to 0.35 nats per token.
const driftKeep = 0.7

// jitter is the spread (in log-probability) of a healthy backend's own
// rounding: two healthy backends differ by about 1e-5 nats per token.
const jitter = 0.005

// candidates are tokens a small model would rank just below the chosen one.
var candidates = []string{"the", "a", ",", ".", "and", "\n", "I", "is", "to", "of", "it", "that", "in", "The", ":", "-", "you", "was", "for", "on", "with", "as"}

// logprobs builds the OpenAI logprobs object of a simulated answer: one
// entry per word (the sim's token), with its logprob and the topK most
// likely candidates. The distribution at each position depends on the text
// alone, so every backend sees the same one, except for a tiny jitter
// seeded by the backend combination (healthy kernels round differently)
// and, for a drifting backend, mass moved off the chosen token.
func (s *Server) logprobs(text string, topK int) map[string]any {
	topK = min(max(topK, 0), maxTopLogprobs)
	backend := s.resolved["moe_runner_backend"] + "/" + s.resolved["fp4_gemm_backend"] + "/" + s.resolved["attention_backend"]
	content := []any{}
	prev := ""
	for i, w := range strings.Fields(text) {
		tok := w
		if i > 0 {
			tok = " " + w
		}
		toks, ps := distribution(tok, prev, i, maxTopLogprobs)
		ps = perturb(ps, seeded(backend, tok, prev, i), jitter)
		if s.rule.Behaviour == Drift {
			ps = drift(ps)
		}
		top := []any{}
		for j := range topK {
			top = append(top, map[string]any{"token": toks[j], "logprob": math.Log(ps[j]), "bytes": []byte(toks[j])})
		}
		content = append(content, map[string]any{"token": tok, "logprob": math.Log(ps[0]), "bytes": []byte(tok), "top_logprobs": top})
		prev = tok
	}
	return map[string]any{"content": content}
}

// distribution is a plausible next-token distribution at a position whose
// greedy token is tok: the chosen token first (usually above 0.9), then n-1
// other candidates with geometrically falling probabilities; what is left
// is the rest of the vocabulary's share. It depends only on its arguments.
func distribution(tok, prev string, pos, n int) ([]string, []float64) {
	rng := seeded("model", tok, prev, pos)
	u := rng.Float64()
	p0 := 0.9999 - 0.3*u*u*u // mostly confident, sometimes a near tie
	toks := []string{tok}
	ps := []float64{p0}
	rest := 1 - p0
	used := map[string]bool{tok: true, strings.TrimSpace(tok): true}
	if other := nearTie(tok, prev); other != "" {
		// The model's one designed near tie: either side of it is a
		// healthy greedy path.
		ps[0] = 0.5
		toks, ps = append(toks, other), append(ps, 0.49)
		rest = 0.01
		used[other] = true
	}
	for _, k := range rng.Perm(len(candidates)) {
		if len(toks) == n {
			break
		}
		c := " " + candidates[k]
		if candidates[k] == "," || candidates[k] == "." || candidates[k] == ":" || candidates[k] == "\n" {
			c = candidates[k]
		}
		if used[c] || used[candidates[k]] {
			continue
		}
		used[c] = true
		toks = append(toks, c)
		ps = append(ps, rest*0.5*(0.55+0.1*rng.Float64()))
		rest -= ps[len(ps)-1]
	}
	return toks, ps
}

// perturb multiplies each probability by exp(sigma*N(0,1)) and scales them
// so the tail keeps its share; the chosen token stays first.
func perturb(ps []float64, rng *rand.Rand, sigma float64) []float64 {
	out := make([]float64, len(ps))
	var sum, before float64
	for i, p := range ps {
		out[i] = p * math.Exp(sigma*rng.NormFloat64())
		sum += out[i]
		before += p
	}
	for i := range out {
		out[i] *= before / sum
	}
	for i := 1; i < len(out); i++ {
		out[i] = min(out[i], out[0]*0.99)
	}
	return out
}

// drift moves 1-driftKeep of the chosen token's probability to the other
// candidates and the tail, in proportion to what they had.
func drift(ps []float64) []float64 {
	out := make([]float64, len(ps))
	out[0] = ps[0] * driftKeep
	scale := (1 - out[0]) / (1 - ps[0])
	for i := 1; i < len(ps); i++ {
		out[i] = min(ps[i]*scale, out[0]*0.99)
	}
	return out
}

// seeded is a random source that depends only on its arguments.
func seeded(salt, tok, prev string, pos int) *rand.Rand {
	h := fnv.New64a()
	for _, s := range []string{salt, tok, prev} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(pos))
	h.Write(b[:])
	return rand.New(rand.NewPCG(h.Sum64(), 7))
}
