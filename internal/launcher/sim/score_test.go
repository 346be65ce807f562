package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
)

// scoreProfile gives each behaviour to the MoE runner of its name; the
// rest are healthy.
const scoreProfile = `name = "score"
[[rule]]
when = { moe_runner_backend = "drift" }
behaviour = "drift"
[[rule]]
when = { moe_runner_backend = "tie" }
behaviour = "tie"
[[rule]]
when = { moe_runner_backend = "derail" }
behaviour = "derail"
[[rule]]
when = { moe_runner_backend = "garbage" }
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "nan" }
behaviour = "nan"
`

// scoreProbes are the smoke set's greedy probes with logprobs and a greedy
// one about a topic, where the sim's model has its near tie.
func scoreProbes() probe.Set {
	var set probe.Set
	for _, p := range probe.Smoke().Probes {
		if p.TopLogprobs > 0 {
			set.Probes = append(set.Probes, p)
		}
	}
	sea := probe.Chat("sea", "Write two sentences about the sea.", &evidence.Expect{Contains: "sea"}, 96, 1).Greedy()
	return probe.Set{Probes: append(set.Probes, sea)}
}

// scoreCell serves a sim backend (MoE runner moe, FP4 GEMM fp4) of
// scoreProfile, runs scoreProbes on it and has it score the reference's
// answers (nil: the reference is this cell); it returns its observations.
func scoreCell(t *testing.T, moe, fp4 string, ref *classify.Reference) []evidence.Observation {
	t.Helper()
	p, err := ParseProfile("score.toml", []byte(scoreProfile))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{ModelPath: "/m", MoERunner: moe, FP4Gemm: fp4, ReasoningParser: "qwen3", TP: 1}, p, &bytes.Buffer{})
	s.SetReady()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c := &probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second, Engine: "sim"}
	set := scoreProbes()
	obs := c.Run(context.Background(), set)
	if ref == nil {
		return obs
	}
	sc := c.Scorer()
	for i := range obs {
		for _, ro := range ref.Observations {
			if ro.Probe == obs[i].Probe && ro.Request == obs[i].Request && probe.Forceable(set.Probes[i], obs[i], ro) {
				obs[i].Forced = sc.Score(context.Background(), set.Probes[i], obs[i].Request, ro, ref.Cell)
			}
		}
	}
	return obs
}

// TestSimScoresForced: the sim scores a reference's answer through SGLang's
// /v1/tokenize and /generate consistently with its own generation. A
// healthy backend scoring the answer it generated itself gives the very
// numbers it generated it with; another healthy backend is within the
// healthy floor; a drifting one drifts over the whole answer; a backend
// that flips the model's near tie gives the reference's token the tie's
// other share where it parted and is within the floor over the answer; a
// derailing one (fluent, wrong after its first sentence) gives the
// reference's tokens little probability from where it would have parted;
// garbage gives most of them little; a NaN backend fails the scoring as
// it fails logprobs.
func TestSimScoresForced(t *testing.T) {
	refObs := scoreCell(t, "flashinfer_cutlass", "flashinfer_cudnn", nil)
	ref := &classify.Reference{Cell: "reference", Observations: refObs}
	seaAnswer := ""
	for _, o := range refObs {
		if o.Probe == "sea" {
			seaAnswer = o.Text
		}
	}
	if !strings.Contains(seaAnswer, " is"+tieWord+" ") {
		t.Fatalf("the reference's sea answer %q has no near tie", seaAnswer)
	}

	t.Run("the reference's own backend gives its own numbers", func(t *testing.T) {
		obs := scoreCell(t, "flashinfer_cutlass", "flashinfer_cudnn", ref)
		forced := 0
		for _, o := range obs {
			if o.Forced == nil {
				continue
			}
			forced++
			if o.Forced.Err != "" || o.Forced.Method != probe.ForceSGLang || o.Forced.Against != "reference" {
				t.Fatalf("%s: forced %+v", o.Probe, o.Forced)
			}
			gen := o.Logprobs.Steps
			if len(o.Forced.Steps) != len(gen) {
				t.Fatalf("%s: %d forced steps for %d generated", o.Probe, len(o.Forced.Steps), len(gen))
			}
			for j, st := range o.Forced.Steps {
				if st.Token != gen[j].Token || math.Abs(st.Logprob-gen[j].Logprob) > 1e-12 || !sameAlts(st.Top, gen[j].Top) {
					t.Fatalf("%s token %d: forced %+v, generated %+v", o.Probe, j, st, gen[j])
				}
			}
		}
		if forced != len(scoreProbes().Probes) {
			t.Errorf("%d probes scored, want every greedy one", forced)
		}
	})

	for _, tc := range []struct {
		name     string
		moe, fp4 string
		// over says whether the forced divergence is above the floor.
		over bool
		// check looks at the sea probe's forced steps.
		check func(t *testing.T, steps []evidence.Step)
	}{
		{name: "another healthy backend", moe: "flashinfer_cutedsl", fp4: "flashinfer_cudnn"},
		{name: "drift", moe: "drift", fp4: "flashinfer_cudnn", over: true},
		{name: "tie", moe: "tie", fp4: "flashinfer_cudnn", check: func(t *testing.T, steps []evidence.Step) {
			for j, st := range steps {
				if st.Token == tieWord && j > 0 && steps[j-1].Token == " is" {
					if math.Abs(st.Logprob-math.Log(0.49)) > 0.05 {
						t.Errorf("at the tie the reference's %q has logprob %.3f, want the tie's other side, about ln 0.49", st.Token, st.Logprob)
					}
					return
				}
			}
			t.Errorf("no near tie among the forced steps")
		}},
		{name: "derail", moe: "derail", fp4: "flashinfer_cudnn", over: true, check: func(t *testing.T, steps []evidence.Step) {
			first := strings.Index(seaAnswer, ". ")
			var text strings.Builder
			for _, st := range steps {
				low := st.Logprob < math.Log(0.001)
				if after := text.Len() > first; low != after {
					t.Errorf("token %q after %q: logprob %.3f; want low exactly after the first sentence", st.Token, text.String(), st.Logprob)
					return
				}
				text.WriteString(st.Token)
			}
		}},
		{name: "garbage", moe: "garbage", fp4: "flashinfer_cudnn", over: true, check: func(t *testing.T, steps []evidence.Step) {
			// Common words are among its candidates too, so a few of the
			// reference's tokens keep a candidate's share; most get the
			// tail's.
			low := 0
			for _, st := range steps {
				if st.Logprob < math.Log(0.001) {
					low++
				}
			}
			if low < len(steps)*3/4 {
				t.Errorf("garbage gives %d of the reference's %d tokens little probability, want most", low, len(steps))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := scoreCell(t, tc.moe, tc.fp4, ref)
			var total float64
			var compared int
			for _, o := range obs {
				if o.Forced == nil || o.Forced.Err != "" {
					t.Fatalf("%s: forced %+v", o.Probe, o.Forced)
				}
				p, ok := classify.ForcedNumerics(o, ref)
				if !ok || p.Compared != len(o.Forced.Steps) {
					t.Fatalf("%s: forced numerics %+v (%v)", o.Probe, p, ok)
				}
				t.Logf("%s: KL %.3g over %d forced tokens (generated: %d tokens, first diff %v)", o.Probe, p.KL, p.Compared, p.Tokens, p.FirstDiff)
				total += p.KL * float64(p.Compared)
				compared += p.Compared
				if o.Probe == "sea" && tc.check != nil {
					tc.check(t, o.Forced.Steps)
				}
			}
			if kl := total / float64(compared); (kl > classify.DegradedKL) != tc.over {
				t.Errorf("forced KL %.3g nats/token over %d tokens; want above the floor %g: %v", kl, compared, classify.DegradedKL, tc.over)
			}
		})
	}

	t.Run("nan", func(t *testing.T) {
		p, _ := ParseProfile("score.toml", []byte(scoreProfile))
		s := New(Options{ModelPath: "/m", MoERunner: "nan", FP4Gemm: "x", TP: 1}, p, &bytes.Buffer{})
		s.SetReady()
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		set := scoreProbes()
		f := (&probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second, Engine: "sim"}).Scorer().Score(context.Background(), set.Probes[0], 0, refObs[0], "reference")
		if f == nil || f.Method != probe.ForceSGLang || !strings.Contains(f.Err, "HTTP 500: Out of range float values") {
			t.Errorf("forced %+v", f)
		}
	})
}

func sameAlts(a, b []evidence.Alt) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]float64{}
	for _, x := range a {
		m[x.Token] = x.Logprob
	}
	for _, x := range b {
		if v, ok := m[x.Token]; !ok || math.Abs(v-x.Logprob) > 1e-12 {
			return false
		}
	}
	return true
}

// TestSimTokenizeGenerate: the sim's /v1/tokenize renders a conversation
// through its chat template and /generate continues an assistant turn the
// ids open, as SGLang's endpoints do; bad requests get SGLang's 400.
func TestSimTokenizeGenerate(t *testing.T) {
	_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", TP: 1})
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	status, tok := post("/v1/tokenize", `{"messages":[{"role":"user","content":"Say 'OK'"}],"chat_template_kwargs":{"enable_thinking":false}}`)
	if status != 200 || tok["count"].(float64) < 5 {
		t.Fatalf("tokenize: %d %v", status, tok)
	}
	ids, _ := json.Marshal(tok["tokens"])
	status, gen := post("/generate", `{"input_ids":`+string(ids)+`,"sampling_params":{"max_new_tokens":8}}`)
	if status != 200 || gen["text"] != "OK" || gen["meta_info"].(map[string]any)["finish_reason"].(map[string]any)["type"] != "stop" {
		t.Errorf("generate after the template's assistant turn: %d %v", status, gen)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/tokenize", `{"prompt":"a","messages":[]}`, "Exactly one of 'prompt' or 'messages'"},
		{"/v1/tokenize", `{"messages":[{"role":"user","content":"a"}],"continue_final_message":true}`, "last message is not the assistant's"},
		{"/generate", `{"input_ids":[99999]}`, "out of vocabulary"},
		{"/generate", `{}`, "Either text or input_ids"},
	} {
		if status, m := post(tc.path, tc.body); status != 400 || !strings.Contains(m["message"].(string), tc.want) {
			t.Errorf("%s %s: %d %v, want 400 %q", tc.path, tc.body, status, m, tc.want)
		}
	}
}
