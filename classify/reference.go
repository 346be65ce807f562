package classify

import (
	"fmt"
	"strings"

	"github.com/bmx-dev/bmx/evidence"
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
	switch {
	case v == Correct && o.Expect == nil && o.Temperature == nil && ro.Temperature == nil:
		answer, _ := SplitThinking(o.Text)
		if agree, score := Agree(answer, refAnswer); !agree {
			return Wrong, fmt.Sprintf("diverges from the reference cell %s (%.0f%% word agreement); the reference answered %q", r.Cell, score*100, clipWords(refAnswer, 20)), false
		}
		return v, reason + "; agrees with the reference cell", true
	case v == Wrong || v == Garbage || v == NaN:
		return v, fmt.Sprintf("%s; the reference cell %s answered %q", reason, r.Cell, clipWords(refAnswer, 20)), false
	}
	return v, reason, false
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
