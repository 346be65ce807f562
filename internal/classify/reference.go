package classify

import (
	"fmt"
	"math"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Agreement thresholds for comparing a greedy answer with the reference
// cell's. Backends differ in numerics, so even healthy ones drift apart after
// a while; broken ones part at once or share little. An answer agrees when
// its first agreePrefix words (or half of a shorter answer) match, or when
// the longest common word subsequence covers agreeSimilarity of both.
const (
	agreePrefix     = 8
	agreeSimilarity = 0.5
)

// find returns the reference observation of the same probe and request.
func (r *Reference) find(o evidence.Observation) (evidence.Observation, bool) {
	if r == nil {
		return evidence.Observation{}, false
	}
	for _, ro := range r.Observations {
		if ro.Probe == o.Probe && ro.Request == o.Request {
			return ro, true
		}
	}
	return evidence.Observation{}, false
}

// compare refines a verdict with the reference: a greedy answer without an
// expectation that was well-formed must also agree with the reference's; a
// failing answer says what the reference answered.
func (r *Reference) compare(o evidence.Observation, v Verdict, reason string) (Verdict, string, bool) {
	ro, ok := r.find(o)
	if !ok || o.Kind == evidence.ModelInfo {
		return v, reason, false
	}
	refV, _, _ := Observation(ro)
	if refV != Correct {
		return v, reason, false
	}
	refAnswer, _ := SplitThinking(ro.Text)
	refAnswer = strings.TrimSpace(refAnswer)
	greedy := o.Expect == nil && o.Temperature == nil && ro.Temperature == nil
	answer, _ := SplitThinking(o.Text)
	answer = strings.TrimSpace(answer)
	switch {
	case v == Correct && greedy:
		if answer == refAnswer {
			return v, reason + "; agrees with the reference cell", true
		}
		agree, score := Agree(answer, refAnswer)
		if p, ok := ForcedNumerics(o, r); ok {
			return r.compareForced(o, p, v, reason, score, refAnswer)
		}
		if tie, ok := partedOnNearTie(o, ro); ok {
			if kl := prefixKL(o, ro); kl <= DegradedKL {
				// Healthy numerics flip exact ties too: up to the tie the
				// cell is as close to the reference as healthy backends
				// are, so the other path is no sign of a fault.
				return v, fmt.Sprintf("%s; parts from the reference cell %s %s, with numerics within the healthy floor up to it (KL %.2g nats/token, threshold %g): another greedy path, as healthy numerics take at a tie",
					reason, r.Cell, tie, kl, DegradedKL), true
			}
			return Degraded, fmt.Sprintf("parts from the reference cell %s %s, and the answer stays well-formed (%.0f%% word agreement after it): the numerics chose another path, not a wrong answer",
				r.Cell, tie, score*100), false
		}
		if agree && !(comparable(o) && comparable(ro)) {
			// Without logprobs nothing tells a tie that healthy numerics
			// flipped from a fault that took over after the first words:
			// the answer is not condemned, and not vouched for either.
			return v, fmt.Sprintf("%s; agrees with the reference cell %s in its first words only (%.0f%% word agreement), and without logprobs bmx cannot tell whether it parts at a near tie", reason, r.Cell, score*100), false
		}
		if comparable(o) && comparable(ro) {
			return Wrong, fmt.Sprintf("parts from the reference cell %s%s, where the reference did not rank the cell's token near its own (%.0f%% word agreement); the reference answered %q", r.Cell, partsAt(o, ro), score*100, clipWords(refAnswer, 20)), false
		}
		return Wrong, fmt.Sprintf("diverges from the reference cell %s (%.0f%% word agreement); the reference answered %q", r.Cell, score*100, clipWords(refAnswer, 20)), false
	case v == Garbage && greedy && loopOnly(answer, o) && loopsToo(refAnswer):
		// The model itself loops at this prompt (the reference repeats a
		// sentence too): a loop on another greedy path, taken at a near
		// tie, is the model's habit on that path, not the backend's garbage.
		if tie, ok := partedOnNearTie(o, ro); ok {
			return Degraded, fmt.Sprintf("%s, after it parts from the reference cell %s %s; the reference repeats itself at this prompt too: the numerics chose another path, the model loops on it",
				reason, r.Cell, tie), false
		}
		fallthrough
	case v == Wrong || v == Garbage || v == NaN:
		return v, fmt.Sprintf("%s; the reference cell %s answered %q", reason, r.Cell, clipWords(refAnswer, 20)), false
	}
	return v, reason, false
}

// compareForced judges a greedy answer whose text parts from the
// reference's by the cell's scoring of the reference's own answer
// (teacher-forced, p): within the healthy floor over every token, the
// parting is another greedy path that healthy numerics took at a tie; past
// it, a parting where the cell still ranked the reference's token near its
// own is numerics gone astray (degraded), any other a wrong answer.
func (r *Reference) compareForced(o evidence.Observation, p ProbeNumerics, v Verdict, reason string, score float64, refAnswer string) (Verdict, string, bool) {
	figure := fmt.Sprintf("KL %.2g nats/token over the reference's %d tokens, teacher-forced (%s), threshold %g", p.KL, p.Compared, o.Forced.Method, DegradedKL)
	at := ""
	if p.FirstDiff != nil {
		at = fmt.Sprintf(" at token %d", *p.FirstDiff)
	}
	if p.KL <= DegradedKL {
		return v, fmt.Sprintf("%s; parts from the reference cell %s%s, and scored on the reference's own answer its numerics stay within the healthy floor (%s): another greedy path, as healthy numerics take at a tie",
			reason, r.Cell, at, figure), true
	}
	if gap, ok := forcedGap(o.Forced, p.FirstDiff); ok && gap <= nearTieNats {
		return Degraded, fmt.Sprintf("parts from the reference cell %s%s on a near tie (it ranked the reference's token %.2f nats below its own), and scored on the reference's own answer its numerics diverge (%s); the answer stays well-formed (%.0f%% word agreement)",
			r.Cell, at, gap, figure, score*100), false
	}
	return Wrong, fmt.Sprintf("parts from the reference cell %s%s where it did not rank the reference's token near its own, and scored on the reference's own answer its numerics diverge (%s; %.0f%% word agreement); the reference answered %q",
		r.Cell, at, figure, score*100, clipWords(refAnswer, 20)), false
}

// forcedGap is how far below its own top candidate a cell ranked the
// reference's token at position at, from its teacher-forced scoring.
func forcedGap(f *evidence.Forced, at *int) (float64, bool) {
	if f == nil || at == nil || *at >= len(f.Steps) {
		return 0, false
	}
	st := f.Steps[*at]
	top := st.Logprob
	for _, a := range st.Top {
		top = max(top, a.Logprob)
	}
	gap := top - st.Logprob
	return gap, !math.IsNaN(gap)
}

// nearTieNats is how far below its own choice the reference may have ranked
// the token a cell chose where their greedy paths part, for the parting to
// be a near tie: e^-1, the cell's token had at least 37% of the
// probability of the reference's. Numerics that change in the last bits
// (an fp8 GEMM, bf16 accumulation) flip such ties and nothing else: on the
// H200 (examples/torch-gpu/h200), every greedy parting of 21 cells from the
// float32 reference, fp8 cells included, was within 0.46 nats. A broken
// kernel picks a token the reference found unlikely or did not rank.
const nearTieNats = 1.0

// partedOnNearTie finds where a greedy answer's tokens first part from the
// reference's, from both sides' top-k logprobs, and says so ("at token 3 on
// a near tie: the reference ranked " s" 0.16 nats below its " the"") when
// the shared prefix was compared within healthy divergence and the
// reference ranked the cell's token within nearTieNats of its own.
func partedOnNearTie(o, ro evidence.Observation) (string, bool) {
	if !comparable(o) || !comparable(ro) {
		return "", false
	}
	p := compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps)
	if p.FirstDiff == nil || *p.FirstDiff >= min(len(o.Logprobs.Steps), len(ro.Logprobs.Steps)) || p.KL > brokenKL {
		return "", false
	}
	i := *p.FirstDiff
	cell, ref := o.Logprobs.Steps[i], ro.Logprobs.Steps[i]
	for _, a := range ref.Top {
		if a.Token != cell.Token {
			continue
		}
		gap := ref.Logprob - a.Logprob
		if gap > nearTieNats || math.IsNaN(gap) {
			return "", false
		}
		return fmt.Sprintf("at token %d on a near tie (the reference ranked %q %.2f nats below its %q)", i, cell.Token, gap, ref.Token), true
	}
	return "", false
}

// partsAt is " at token N" where two greedy answers' tokens first part,
// "" when they do not.
func partsAt(o, ro evidence.Observation) string {
	p := compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps)
	if p.FirstDiff == nil {
		return ""
	}
	return fmt.Sprintf(" at token %d", *p.FirstDiff)
}

// prefixKL is the divergence of a greedy answer from the reference's over
// their shared prefix and the first differing position.
func prefixKL(o, ro evidence.Observation) float64 {
	return compareSteps(o.Logprobs.Steps, ro.Logprobs.Steps).KL
}

// loopOnly reports an answer whose one garbage sign is a sentence said over
// and over.
func loopOnly(answer string, o evidence.Observation) bool {
	_, n := repeatedSentence(answer)
	if n < loopRepeats {
		return false
	}
	g, _ := garbled(answer, textContext{prompt: o.Prompt, truncated: o.FinishReason == "length", loopsAllowed: true})
	return !g
}

// loopsToo reports a reference answer that says a sentence more than once.
func loopsToo(refAnswer string) bool {
	_, n := repeatedSentence(refAnswer)
	return n >= 2
}

// Agree compares two answers word by word and returns whether they agree
// and their similarity (2*LCS/(len a + len b) over the first 128 words).
func Agree(a, b string) (bool, float64) {
	wa, wb := normWords(a, 128), normWords(b, 128)
	if len(wa) == 0 || len(wb) == 0 {
		return len(wa) == len(wb), 0
	}
	prefix := 0
	for prefix < len(wa) && prefix < len(wb) && wa[prefix] == wb[prefix] {
		prefix++
	}
	sim := 2 * float64(lcs(wa, wb)) / float64(len(wa)+len(wb))
	need := min(agreePrefix, (min(len(wa), len(wb))+1)/2)
	return prefix >= need || sim >= agreeSimilarity, sim
}

func normWords(s string, n int) []string {
	f := strings.Fields(strings.ToLower(s))
	for i, w := range f {
		f[i] = strings.Trim(w, ".,;:!?\"'()[]*`")
	}
	if len(f) > n {
		f = f[:n]
	}
	return f
}

// lcs is the length of the longest common subsequence of two word lists.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			switch {
			case a[i] == b[j]:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func clipWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) <= n {
		return strings.Join(f, " ")
	}
	return strings.Join(f[:n], " ") + " …"
}
