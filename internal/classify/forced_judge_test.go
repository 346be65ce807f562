package classify

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// TestJudgeForcedParting: where a cell's greedy text parts from the
// reference's, its scoring of the reference's own answer decides: within
// the floor it is a tie another path took (correct, positive evidence);
// past it, with the reference's token near its own choice, degraded; with
// the reference's token far below, wrong.
func TestJudgeForcedParting(t *testing.T) {
	words := strings.Fields("there was a little girl named Lily who loved the park")
	step := func(tok string, p float64, alt string, altP float64) evidence.Step {
		return evidence.Step{Token: tok, Logprob: logf(p), Top: []evidence.Alt{{Token: tok, Logprob: logf(p)}, {Token: alt, Logprob: logf(altP)}}}
	}
	ref := story(strings.Join(words, " "))
	ref.Logprobs = &evidence.Logprobs{Tokens: len(words)}
	for i, w := range words {
		if i == 4 {
			ref.Logprobs.Steps = append(ref.Logprobs.Steps, step(w, 0.5, "boy", 0.49))
			continue
		}
		ref.Logprobs.Steps = append(ref.Logprobs.Steps, step(w, 0.98, "zz", 0.01))
	}
	r := &Reference{Cell: "ref", Observations: []evidence.Observation{ref}}
	// The cell said "boy" at 4 and went on as the reference did.
	cell := func(forced func(i int, w string) evidence.Step) evidence.Observation {
		text := strings.Replace(ref.Text, "girl", "boy", 1)
		o := story(text)
		o.Logprobs = &evidence.Logprobs{Tokens: len(words)}
		for i, w := range strings.Fields(text) {
			st := step(w, 0.98, "zz", 0.01)
			if i == 4 {
				st = step(w, 0.5, "girl", 0.49)
			}
			o.Logprobs.Steps = append(o.Logprobs.Steps, st)
		}
		o.Forced = &evidence.Forced{Against: "ref", Method: "sim"}
		for i, w := range words {
			o.Forced.Steps = append(o.Forced.Steps, forced(i, w))
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		forced func(i int, w string) evidence.Step
		want   Verdict
		says   string
	}{
		{"a tie flip, healthy on the reference's tokens", func(i int, w string) evidence.Step {
			if i == 4 {
				return evidence.Step{Token: w, Logprob: logf(0.49), Top: []evidence.Alt{{Token: "boy", Logprob: logf(0.5)}, {Token: w, Logprob: logf(0.49)}}}
			}
			return step(w, 0.98, "zz", 0.01)
		}, Correct, "within the healthy floor"},
		{"a tie flip, drifting on the reference's tokens", func(i int, w string) evidence.Step {
			if i == 4 {
				return evidence.Step{Token: w, Logprob: logf(0.45), Top: []evidence.Alt{{Token: "boy", Logprob: logf(0.5)}, {Token: w, Logprob: logf(0.45)}}}
			}
			return step(w, 0.6, "zz", 0.39)
		}, Degraded, "near tie"},
		{"the reference's token far below the cell's", func(i int, w string) evidence.Step {
			if i >= 4 {
				return evidence.Step{Token: w, Logprob: logf(0.001), Top: []evidence.Alt{{Token: "boy", Logprob: logf(0.99)}, {Token: w, Logprob: logf(0.001)}}}
			}
			return step(w, 0.98, "zz", 0.01)
		}, Wrong, "did not rank the reference's token near its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := cell(tc.forced)
			v, reason, agreed := r.compare(o, Correct, "well-formed text")
			if v != tc.want || !strings.Contains(reason, tc.says) || !strings.Contains(reason, "teacher-forced") || agreed != (tc.want == Correct) {
				t.Errorf("%s (agreed %v): %s; want %s saying %q", v, agreed, reason, tc.want, tc.says)
			}
		})
	}
}
