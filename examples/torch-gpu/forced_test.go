package torchgpu

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
)

// TestForcedAnswerTokens: the server scores a given answer by tokenizing its
// text as a continuation of the prompt (no BOS, no space prefix:
// gguf2hf.Tokenizer.encode(text, bos=False, space_prefix=False)), which is
// only the reference's context if that gives back the ids the model
// generated. It does for greedy answers of the plain-Python reference
// model; where it would not, bmx sees the decoded tokens differ and records
// nothing.
func TestForcedAnswerTokens(t *testing.T) {
	t.Parallel()
	dir := convert(t, needModel(t))
	prompts := []string{"Once upon a time", "Lily and Tom went to the park."}
	// One process for every prompt, not one to generate and one to encode
	// each: each prompt's 40 greedy steps (byte for byte what gguf2hf.py
	// generate prints: a model of its own each, as its key/value cache
	// outlives a generation) and its answer's text encoded again as the
	// server encodes it.
	out := run(t, python(), append([]string{"-S", "-c", `import json, sys
import gguf2hf
tok = gguf2hf.Tokenizer.load(sys.argv[1])
for prompt in sys.argv[2:]:
    g = json.loads(gguf2hf.generate_json(gguf2hf.ReferenceLlama(sys.argv[1]), tok, prompt, 40))
    print(json.dumps({"generated": g, "encoded": tok.encode(g["text"], bos=False, space_prefix=False)}))`, dir}, prompts...)...)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(prompts) {
		t.Fatalf("%d answers for %d prompts:\n%s", len(lines), len(prompts), out)
	}
	for i, prompt := range prompts {
		var got struct {
			Generated generated
			Encoded   []int
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("%v: %s", err, lines[i])
		}
		g, ids := got.Generated, got.Encoded
		var text strings.Builder
		for _, s := range g.Steps {
			text.WriteString(s.Token)
		}
		if text.String() != g.Text {
			t.Fatalf("%q: the steps' tokens spell %q, the text is %q", prompt, text.String(), g.Text)
		}
		if len(ids) != len(g.IDs) {
			t.Fatalf("%q: the answer %q re-tokenizes to %v, generated %v", prompt, g.Text, ids, g.IDs)
		}
		for i := range ids {
			if ids[i] != g.IDs[i] {
				t.Fatalf("%q: the answer %q re-tokenizes to %v, generated %v", prompt, g.Text, ids, g.IDs)
			}
		}
	}
}

// TestServerForced: the server scores a reference's greedy answer in
// vLLM's shape (continue_final_message and prompt_logprobs), which bmx's
// probe client finds by itself (the server has no SGLang endpoints). The
// reference's own server scoring its answer gives the numbers it generated
// it with; a bfloat16 server scores it within the healthy floor, over
// every token of the answer.
func TestServerForced(t *testing.T) {
	model := needModel(t)
	needTorch(t)
	p := probe.Chat("once", "Once upon a time", nil, 24, 1).Greedy()
	set := probe.Set{Name: "once", Probes: []probe.Probe{p}}
	ctx := context.Background()
	cell := func(args ...string) (*probe.Client, evidence.Observation) {
		url := startServer(t, model, append([]string{"--device", "cpu", "--attention-backend", "math"}, args...)...)
		c := &probe.Client{BaseURL: url, Timeout: 120 * time.Second}
		obs := c.Run(ctx, set)
		if len(obs) != 1 || !obs[0].Answered() || obs[0].Logprobs == nil || len(obs[0].Logprobs.Steps) != 24 {
			t.Fatalf("%v: %+v", args, obs)
		}
		return c, obs[0]
	}
	refClient, refObs := cell("--dtype", "float32")
	ref := &classify.Reference{Cell: "float32", Observations: []evidence.Observation{refObs}}
	for _, tc := range []struct {
		name string
		c    *probe.Client
		o    evidence.Observation
		max  float64 // the most KL per token
	}{
		{"itself", refClient, refObs, 1e-6},
		{"bfloat16", nil, evidence.Observation{}, classify.DegradedKL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, o := tc.c, tc.o
			if c == nil {
				c, o = cell("--dtype", tc.name)
			}
			if !probe.Forceable(p, o, refObs) {
				t.Fatalf("not forceable: %+v", o)
			}
			o.Forced = c.Scorer().Score(ctx, p, 0, refObs, ref.Cell)
			f := o.Forced
			if f == nil || f.Err != "" || f.Method != probe.ForceVLLMChat || len(f.Steps) != len(refObs.Logprobs.Steps) {
				t.Fatalf("forced %+v", f)
			}
			if tc.name == "itself" {
				for i, st := range f.Steps {
					g := refObs.Logprobs.Steps[i]
					if st.Token != g.Token || math.Abs(st.Logprob-g.Logprob) > 1e-4 {
						t.Errorf("token %d: forced %q %.6f, generated %q %.6f", i, st.Token, st.Logprob, g.Token, g.Logprob)
					}
				}
			}
			n, ok := classify.ForcedNumerics(o, ref)
			if !ok || n.Compared != len(f.Steps) || n.KL > tc.max {
				t.Errorf("forced numerics %+v (%v), want every token compared within %g", n, ok, tc.max)
			}
			t.Logf("%s: KL %.3g nats/token over %d of the reference's tokens (its own answer parted at %v)", tc.name, n.KL, n.Compared, n.FirstDiff)
		})
	}
}
