package classify

import (
	"strings"
	"testing"
)

// TestNaNCueLosesNoMatch: nanLogRe's cheap check (nanCue) passes every line
// its regexp matches, in every line and error of every corpus case and in
// lines written to sit at the cue's edges; and it turns away the lines of a
// healthy vLLM log, which all say INFO.
func TestNaNCueLosesNoMatch(t *testing.T) {
	lines := []string{
		"RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
		"probability tensor contains either infs, nans",
		"PROBABILITY TENSOR CONTAINS EITHER INF, NAN OR ELEMENT < 0",
		"assert(!std::isinf(x)) failed", "assertion (!isnan(v))", "logprobs=[-nan, -nan, -nan]",
		"cumulative_logprob: NaN", "logits contain inf", "found NaN", "Detected Inf",
		"ValueError: Out of range float values are not JSON compliant", "tensor([[nan, nan, nan]])",
		"the model produced a NaN", "hidden_states have inf", "[nan,nan,nan]", "logprob (3, nan)",
		"nan logprobs at step 3", "NaN in the logits of rank 0",
	}
	for _, path := range corpora {
		for _, c := range loadCases(t, path) {
			lines = append(lines, strings.Split(c.Log, "\n")...)
			for _, o := range c.Probes {
				lines = append(lines, o.Err, o.Text)
			}
		}
	}
	matched := 0
	for _, l := range lines {
		if nanLogRe.re.MatchString(l) {
			matched++
			if !nanCue(l) {
				t.Errorf("nanCue turns away a line the regexp matches: %q", l)
			}
		}
	}
	if matched < 18 {
		t.Errorf("only %d lines match nanLogRe, want at least the 18 written here", matched)
	}
	for _, l := range []string{
		"INFO 10-27 20:44:35 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000",
		"INFO:     Started server process [1]", "Loading inference engine information",
		"nanoseconds elapsed: 12", "Infinity stones",
	} {
		if nanCue(l) {
			t.Errorf("nanCue passes %q, which no NaN pattern can match", l)
		}
	}
	t.Logf("%d lines, %d match", len(lines), matched)
}
