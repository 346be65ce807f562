package probe

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/google/go-cmp/cmp"
)

// forcedRef is a reference's greedy answer "323" to "What is 300+23?",
// three tokens with top-2 candidates.
func forcedRef() evidence.Observation {
	steps := []evidence.Step{
		{Token: "3", Logprob: -0.01, Top: []evidence.Alt{{Token: "3", Logprob: -0.01}, {Token: "The", Logprob: -4.6}}},
		{Token: "2", Logprob: -0.02, Top: []evidence.Alt{{Token: "2", Logprob: -0.02}, {Token: "0", Logprob: -4}}},
		{Token: "3", Logprob: -0.03, Top: []evidence.Alt{{Token: "3", Logprob: -0.03}, {Token: ".", Logprob: -3.5}}},
	}
	n := len(steps)
	return evidence.Observation{Probe: "math", Kind: evidence.Chat, Prompt: "What is 300+23?", Text: "323", HTTPStatus: 200, Tokens: &n,
		Logprobs: &evidence.Logprobs{Tokens: n, Steps: steps}}
}

func forcedProbe() Probe {
	p := Chat("math", "What is 300+23?", evidence.Number(323), 64, 1).Greedy()
	p.TopLogprobs = 2
	return p
}

// decodeBody decodes a request's JSON body, failing the test on error.
func decodeBody(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Errorf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	return m
}

// checkMessages checks a forcing request's messages: the probe's, then the
// reference's answer as the assistant's.
func checkMessages(t *testing.T, req map[string]any) {
	t.Helper()
	want := []any{map[string]any{"role": "user", "content": "What is 300+23?"}, map[string]any{"role": "assistant", "content": "323"}}
	if diff := cmp.Diff(want, req["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if req["continue_final_message"] != true || req["chat_template_kwargs"].(map[string]any)["enable_thinking"] != false {
		t.Errorf("request %v: want continue_final_message and thinking off", req)
	}
}

// sglangFake is SGLang's /v1/tokenize and /generate for the reference's
// answer: 7 token ids of which the last 3 are the answer; gen, if set,
// answers /generate instead.
func sglangFake(t *testing.T, gen http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			w.Write([]byte(`{"data":[{"id":"qwen"}]}`))
		case "/v1/tokenize":
			req := decodeBody(t, r)
			checkMessages(t, req)
			if req["model"] != "qwen" {
				t.Errorf("tokenize model %v", req["model"])
			}
			w.Write([]byte(`{"tokens":[1,2,3,4,30,31,30],"count":7,"max_model_len":4096}`))
		case "/generate":
			if gen != nil {
				gen(w, r)
				return
			}
			req := decodeBody(t, r)
			if diff := cmp.Diff([]any{1.0, 2.0, 3.0, 4.0, 30.0, 31.0, 30.0}, req["input_ids"]); diff != "" {
				t.Errorf("input_ids (-want +got):\n%s", diff)
			}
			if req["return_logprob"] != true || req["logprob_start_len"] != 3.0 || req["top_logprobs_num"] != 2.0 || req["return_text_in_logprobs"] != true {
				t.Errorf("generate request %v", req)
			}
			// One entry more than asked (the token before the answer), to
			// check the answer is read from the end; the middle token's
			// logprob is NaN, written as Python's json writes it.
			w.Write([]byte(`{"text":"","meta_info":{
				"input_token_logprobs":[[-1.5,4,"?"],[-0.011,30,"3"],[NaN,31,"2"],[-7.5,30,"3"]],
				"input_top_logprobs":[[[-1.5,4,"?"]],[[-0.011,30,"3"],[-4.7,40,"The"]],[[-0.5,31,"2"],[-1,32,"0"]],[[-0.4,33,"."],[-1.2,34,"!"]]],
				"output_token_logprobs":[[-0.1,2,"<|im_end|>"]]}}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestScoreSGLang: on SGLang the answer is rendered through the chat
// template by /v1/tokenize and scored by /generate from its first token
// on; the steps are the reference's tokens with the server's logprob of
// each and its top-k, a null logprob giving a step without candidates.
func TestScoreSGLang(t *testing.T) {
	srv := sglangFake(t, nil)
	c := &Client{BaseURL: srv.URL, Engine: "sglang", Timeout: 5 * time.Second}
	f := c.Scorer().Score(context.Background(), forcedProbe(), 0, forcedRef(), "ref-cell")
	want := &evidence.Forced{Against: "ref-cell", Method: ForceSGLang, Steps: []evidence.Step{
		{Token: "3", Logprob: -0.011, Top: []evidence.Alt{{Token: "3", Logprob: -0.011}, {Token: "The", Logprob: -4.7}}},
		{Token: "2"},
		{Token: "3", Logprob: -7.5, Top: []evidence.Alt{{Token: ".", Logprob: -0.4}, {Token: "!", Logprob: -1.2}}},
	}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("forced (-want +got):\n%s", diff)
	}
}

// TestScoreFailures: a scoring the server answers but cannot give is
// recorded with why, under the method tried.
func TestScoreFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  http.HandlerFunc
		want string
	}{
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"object":"error","message":"Out of range float values are not JSON compliant","type":"InternalServerError","param":null,"code":500}`))
		}, "POST /generate: HTTP 500: Out of range float values are not JSON compliant"},
		{"another tokenization", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"meta_info":{"input_token_logprobs":[[-0.1,30,"3"],[-0.1,35,"23"],[-0.1,0,""]],"input_top_logprobs":[null,null,null]}}`))
		}, `token 1 is "23" where the reference generated "2"`},
		{"no token text", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"meta_info":{"input_token_logprobs":[[-0.1,30,null],[-0.1,31,null],[-0.1,30,null]],"input_top_logprobs":[null,null,null]}}`))
		}, "no token text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sglangFake(t, tc.gen)
			c := &Client{BaseURL: srv.URL, Model: "qwen", Engine: "sglang", Timeout: 5 * time.Second}
			f := c.Scorer().Score(context.Background(), forcedProbe(), 0, forcedRef(), "ref-cell")
			if f == nil || f.Method != ForceSGLang || f.Against != "ref-cell" || f.Steps != nil || !strings.Contains(f.Err, tc.want) {
				t.Errorf("forced %+v, want an error containing %q", f, tc.want)
			}
		})
	}
}

// vllmFake is vLLM: no /v1/tokenize of SGLang's, and a chat completion
// with prompt_logprobs: per prompt token a map from token id to logprob,
// rank and decoded token, the top-k and the prompt's own token when it is
// not among them (the first position null).
func vllmFake(t *testing.T, chats *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/tokenize", "/generate":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"detail":"Not Found"}`))
		case "/v1/chat/completions":
			chats.Add(1)
			req := decodeBody(t, r)
			checkMessages(t, req)
			if req["add_generation_prompt"] != false || req["prompt_logprobs"] != 2.0 || req["max_tokens"] != 1.0 || req["model"] != "m" {
				t.Errorf("chat request %v", req)
			}
			w.Write([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}],
				"usage":{"prompt_tokens":6,"completion_tokens":1,"total_tokens":7},
				"prompt_logprobs":[null,{"9":{"logprob":-3,"rank":1,"decoded_token":"user"}},{"7":{"logprob":-0.5,"rank":1,"decoded_token":"\n"}},
				{"30":{"logprob":-0.012,"rank":1,"decoded_token":"3"},"40":{"logprob":-4.5,"rank":2,"decoded_token":"The"}},
				{"32":{"logprob":-0.3,"rank":1,"decoded_token":"0"},"31":{"logprob":-1.4,"rank":2,"decoded_token":"2"}},
				{"33":{"logprob":-0.2,"rank":1,"decoded_token":"."},"34":{"logprob":-2,"rank":2,"decoded_token":"!"},"30":{"logprob":-9,"rank":17,"decoded_token":"3"}}]}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestScoreVLLMChat: on vLLM the answer is the chat's final assistant
// message and the scores its prompt_logprobs; the forced token's logprob
// is its own entry's, in the top-k or added after it, and the top-k are
// the ranks up to k. A server of unknown engine that has no SGLang
// endpoints is found to answer vLLM's shape once and asked only that
// after.
func TestScoreVLLMChat(t *testing.T) {
	want := &evidence.Forced{Against: "ref-cell", Method: ForceVLLMChat, Steps: []evidence.Step{
		{Token: "3", Logprob: -0.012, Top: []evidence.Alt{{Token: "3", Logprob: -0.012}, {Token: "The", Logprob: -4.5}}},
		{Token: "2", Logprob: -1.4, Top: []evidence.Alt{{Token: "0", Logprob: -0.3}, {Token: "2", Logprob: -1.4}}},
		{Token: "3", Logprob: -9, Top: []evidence.Alt{{Token: ".", Logprob: -0.2}, {Token: "!", Logprob: -2}}},
	}}
	for _, engine := range []string{"vllm", ""} {
		t.Run("engine "+engine, func(t *testing.T) {
			var chats atomic.Int32
			srv := vllmFake(t, &chats)
			c := &Client{BaseURL: srv.URL, Model: "m", Engine: engine, Timeout: 5 * time.Second}
			s := c.Scorer()
			for range 2 {
				f := s.Score(context.Background(), forcedProbe(), 0, forcedRef(), "ref-cell")
				if diff := cmp.Diff(want, f); diff != "" {
					t.Errorf("forced (-want +got):\n%s", diff)
				}
			}
			if s.methods[0] != ForceVLLMChat || chats.Load() != 2 {
				t.Errorf("methods %v after two scorings, %d chat requests", s.methods, chats.Load())
			}
		})
	}
}

// TestScoreUnsupported: a server that answers neither method (llama.cpp's
// server: no SGLang endpoints, and a chat reply without prompt_logprobs,
// as a server that ignores fields it does not know gives) records
// nothing, and is not asked again; an engine known not to score is not
// asked at all.
func TestScoreUnsupported(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/v1/tokenize", "/generate":
			http.NotFound(w, r)
		case "/v1/chat/completions":
			w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"length"}]}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s := (&Client{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second}).Scorer()
	for range 2 {
		if f := s.Score(context.Background(), forcedProbe(), 0, forcedRef(), "ref"); f != nil {
			t.Errorf("forced %+v, want nothing", f)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want one per method once", n)
	}
	if f := (&Client{BaseURL: srv.URL, Model: "m", Engine: "llama.cpp"}).Scorer().Score(context.Background(), forcedProbe(), 0, forcedRef(), "ref"); f != nil || requests.Load() != 2 {
		t.Errorf("an engine without a method: forced %+v after %d requests", f, requests.Load())
	}
}

// TestForceable: only greedy chat answers that do not think, against a
// reference answer with top-k logprobs, are scored.
func TestForceable(t *testing.T) {
	temp := float32(0.8)
	cell := evidence.Observation{Probe: "math", Kind: evidence.Chat, HTTPStatus: 200}
	noTop := forcedRef()
	noTop.Logprobs.Steps = []evidence.Step{{Token: "3", Logprob: -0.1}}
	thinking := forcedProbe()
	thinking.Thinking = true
	sampled := forcedProbe()
	sampled.Temperature = &temp
	failed := cell
	failed.Err, failed.ErrKind = "boom", evidence.HTTPError
	for _, tc := range []struct {
		name string
		p    Probe
		o    evidence.Observation
		ref  evidence.Observation
		want bool
	}{
		{"greedy", forcedProbe(), cell, forcedRef(), true},
		{"thinking", thinking, cell, forcedRef(), false},
		{"sampled", sampled, cell, forcedRef(), false},
		{"cell failed", forcedProbe(), failed, forcedRef(), false},
		{"reference without top-k", forcedProbe(), cell, noTop, false},
		{"reference without logprobs", forcedProbe(), cell, evidence.Observation{Kind: evidence.Chat}, false},
	} {
		if got := Forceable(tc.p, tc.o, tc.ref); got != tc.want {
			t.Errorf("%s: Forceable %v, want %v", tc.name, got, tc.want)
		}
	}
}
