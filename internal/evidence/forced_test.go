package evidence

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestForcedCap: a forced scoring is cut as the generated logprobs are: its
// steps to MaxSteps, its error to a head and a tail.
func TestForcedCap(t *testing.T) {
	o := Observation{Forced: &Forced{Against: "ref", Method: "sglang-generate", Steps: make([]Step, MaxSteps+5), Err: strings.Repeat("e", KeepHead+KeepTail+100)}}
	o.Cap()
	if got := len(o.Forced.Steps); got != MaxSteps {
		t.Errorf("forced steps after Cap: %d, want %d", got, MaxSteps)
	}
	if len(o.Forced.Err) >= KeepHead+KeepTail+100 || !strings.Contains(o.Forced.Err, "bmx cut") {
		t.Errorf("forced error not cut: %d bytes", len(o.Forced.Err))
	}
}

// TestForcedJSON: results.jsonl carries a forced scoring under "forced" and
// reads it back; an observation without one has no key.
func TestForcedJSON(t *testing.T) {
	in := Observation{Probe: "math", Forced: &Forced{Against: "a=1", Method: "vllm-chat-prompt-logprobs",
		Steps: []Step{{Token: "3", Logprob: -0.01, Top: []Alt{{Token: "3", Logprob: -0.01}, {Token: " 3", Logprob: -5}}}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"forced":{"against":"a=1","method":"vllm-chat-prompt-logprobs","steps":[{"t":"3"`) {
		t.Errorf("JSON: %s", b)
	}
	var out Observation
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in.Forced, out.Forced); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	plain, _ := json.Marshal(Observation{Probe: "x"})
	if strings.Contains(string(plain), "forced") {
		t.Errorf("an observation without a forced scoring writes one: %s", plain)
	}
}
