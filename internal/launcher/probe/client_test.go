package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// fakeServer serves the given routes; any other request fails the test.
func fakeServer(t *testing.T, routes map[string]http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func reply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

func chatProbe(thinking, logprobs bool) Probe {
	p := Chat("p", "What is 300+23?", evidence.Number(323), 64, 1)
	p.Thinking, p.Logprobs = thinking, logprobs
	return p
}

func runOne(t *testing.T, srv *httptest.Server, p Probe) evidence.Observation {
	t.Helper()
	c := &Client{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second}
	obs := c.Run(context.Background(), Set{Probes: []Probe{p}})
	if len(obs) != 1 {
		t.Fatalf("%d observations", len(obs))
	}
	return obs[0]
}

// TestRequestShape checks what is sent: greedy temperature (not dropped by
// omitempty), the thinking switch either way, logprobs, max_tokens, seed.
func TestRequestShape(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		var got map[string]any
		srv := fakeServer(t, map[string]http.HandlerFunc{
			"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
				if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
					t.Error(err)
				}
				reply(`{"choices":[{"message":{"role":"assistant","content":"323"},"finish_reason":"stop"}]}`)(w, r)
			},
		})
		runOne(t, srv, chatProbe(thinking, true))
		temp, ok := got["temperature"].(float64)
		if !ok || temp <= 0 || temp >= 1e-6 {
			t.Errorf("temperature %v: want a positive value below SGLang's 1e-6 greedy epsilon", got["temperature"])
		}
		kw, _ := got["chat_template_kwargs"].(map[string]any)
		if kw["enable_thinking"] != thinking {
			t.Errorf("chat_template_kwargs %v, want enable_thinking %v", got["chat_template_kwargs"], thinking)
		}
		if got["logprobs"] != true || got["max_tokens"] != float64(64) || got["seed"] == nil || got["model"] != "m" {
			t.Errorf("request %v", got)
		}
		if _, ok := got["top_logprobs"]; ok {
			t.Errorf("top_logprobs %v sent by a probe that did not ask for it", got["top_logprobs"])
		}
	}
}

// TestTopLogprobs checks that the smoke set's greedy text probes ask for
// logprobs with the top-k candidates, and that the candidates come back as
// one step per generated token, null and non-finite ones included.
func TestTopLogprobs(t *testing.T) {
	var got map[string]any
	srv := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			got = nil
			json.NewDecoder(r.Body).Decode(&got)
			reply(`{"choices":[{"message":{"role":"assistant","content":"300+23 = 323"},"finish_reason":"stop",
			  "logprobs":{"content":[
			    {"token":"300","logprob":-0.01,"bytes":[51,48,48],"top_logprobs":[{"token":"300","logprob":-0.01},{"token":"3","logprob":-4.7},{"token":"The","logprob":-6.2}]},
			    {"token":"+23","logprob":-0.2,"top_logprobs":[{"token":"+23","logprob":-0.2},{"token":" +","logprob":-1.8},{"token":"x","logprob":-Infinity}]},
			    {"token":" =","logprob":null,"top_logprobs":[{"token":" =","logprob":null}]},
			    {"token":" 323","logprob":-0.001,"top_logprobs":[{"token":" 323","logprob":-0.001},{"token":" 324","logprob":NaN}]}]}}],
			  "usage":{"completion_tokens":4}}`)(w, r)
		},
	})
	var greedy []string
	for _, p := range Smoke().Probes {
		if p.Kind != evidence.Chat {
			continue
		}
		if len(p.Requests) > 1 {
			if p.Logprobs || p.TopLogprobs != 0 {
				t.Errorf("%s: the concurrent batch asks for logprobs", p.Name)
			}
			continue
		}
		o := runOne(t, srv, p)
		k, _ := got["top_logprobs"].(float64)
		switch {
		case p.Temperature != nil || p.Thinking:
			if k != 0 {
				t.Errorf("%s asks for top_logprobs %v", p.Name, k)
			}
			continue
		case got["logprobs"] != true || k != DefaultTopLogprobs:
			t.Errorf("%s: logprobs %v top_logprobs %v, want true and %d", p.Name, got["logprobs"], got["top_logprobs"], DefaultTopLogprobs)
		}
		greedy = append(greedy, p.Name)
		lp := o.Logprobs
		// The null " =" and its null candidate, the NaN and -Infinity
		// candidates: four values that are not numbers.
		if lp == nil || len(lp.Steps) != 4 || lp.Tokens != 4 || lp.Null+lp.NonFinite != 4 {
			t.Fatalf("%s: logprobs %+v", p.Name, lp)
		}
		want := []evidence.Step{
			{Token: "300", Logprob: -0.01, Top: []evidence.Alt{{Token: "300", Logprob: -0.01}, {Token: "3", Logprob: -4.7}, {Token: "The", Logprob: -6.2}}},
			{Token: "+23", Logprob: -0.2, Top: []evidence.Alt{{Token: "+23", Logprob: -0.2}, {Token: " +", Logprob: -1.8}}},
			{Token: " ="},
			{Token: " 323", Logprob: -0.001, Top: []evidence.Alt{{Token: " 323", Logprob: -0.001}}},
		}
		if g, w := fmt.Sprint(lp.Steps), fmt.Sprint(want); g != w {
			t.Errorf("%s: steps\n%s\nwant\n%s", p.Name, g, w)
		}
		if _, err := json.Marshal(o); err != nil {
			t.Errorf("%s: the observation cannot be recorded: %v", p.Name, err)
		}
	}
	if strings.Join(greedy, ",") != "say-ok,math,count" {
		t.Errorf("greedy probes with top_logprobs: %v", greedy)
	}
}

func TestSampledTemperature(t *testing.T) {
	var got map[string]any
	srv := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			json.NewDecoder(r.Body).Decode(&got)
			reply(`{"choices":[{"message":{"role":"assistant","content":"The sea is wide."},"finish_reason":"stop"}]}`)(w, r)
		},
	})
	var sampled Probe
	for _, p := range Smoke().Probes {
		if p.Temperature != nil {
			sampled = p
		}
	}
	o := runOne(t, srv, sampled)
	if temp, _ := got["temperature"].(float64); temp < 0.79 || temp > 0.81 || o.Temperature == nil {
		t.Errorf("temperature sent %v, recorded %v", got["temperature"], o.Temperature)
	}
}

func TestObservations(t *testing.T) {
	tests := []struct {
		name  string
		probe Probe
		route http.HandlerFunc
		check func(t *testing.T, o evidence.Observation)
	}{
		{
			name:  "SGLang reasoning_content with empty content",
			probe: chatProbe(true, false),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"","reasoning_content":"300+23 is 323"},"finish_reason":"length"}],"usage":{"completion_tokens":64}}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.Text != "" || o.Reasoning != "300+23 is 323" || o.FinishReason != "length" || o.Tokens == nil || *o.Tokens != 64 || !o.Thinking {
					t.Errorf("%+v", o)
				}
			},
		},
		{
			name:  "vLLM reasoning field and null content",
			probe: chatProbe(true, false),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":null,"reasoning":"thinking..."},"finish_reason":"stop"}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.Text != "" || o.Reasoning != "thinking..." {
					t.Errorf("%+v", o)
				}
			},
		},
		{
			name:  "non-finite logprobs as HTTP 500",
			probe: chatProbe(false, true),
			route: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(500)
				io.WriteString(w, `{"object":"error","message":"Out of range float values are not JSON compliant","type":"InternalServerError","param":null,"code":500}`)
			},
			check: func(t *testing.T, o evidence.Observation) {
				if o.HTTPStatus != 500 || o.ErrKind != evidence.HTTPError || o.Err != "Out of range float values are not JSON compliant" {
					t.Errorf("%+v", o)
				}
			},
		},
		{
			name:  "plain-text 500",
			probe: chatProbe(false, false),
			route: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(500)
				io.WriteString(w, "Internal Server Error")
			},
			check: func(t *testing.T, o evidence.Observation) {
				if o.HTTPStatus != 500 || o.Err != "Internal Server Error" {
					t.Errorf("%+v", o)
				}
			},
		},
		{
			name:  "vLLM nested error",
			probe: chatProbe(false, false),
			route: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"message":"max_tokens is too large","type":"BadRequestError","code":400}}`)
			},
			check: func(t *testing.T, o evidence.Observation) {
				if o.HTTPStatus != 400 || o.ErrKind != evidence.HTTPError || o.Err != "max_tokens is too large" {
					t.Errorf("%+v", o)
				}
			},
		},
		{
			name:  "null logprobs",
			probe: chatProbe(false, true),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"!!"},"finish_reason":"length","logprobs":{"content":[{"token":"!","logprob":null,"top_logprobs":[]},{"token":"!","logprob":-0.5,"top_logprobs":[]}]}}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.Logprobs == nil || o.Logprobs.Tokens != 2 || o.Logprobs.Null != 1 || !o.Logprobs.Bad() || o.Logprobs.Min != -0.5 {
					t.Errorf("logprobs %+v", o.Logprobs)
				}
			},
		},
		{
			name:  "bare NaN literal",
			probe: chatProbe(false, true),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"NaN is in here"},"finish_reason":"stop","logprobs":{"content":[{"token":"x","logprob":NaN,"top_logprobs":[]},{"token":"y","logprob":-Infinity,"top_logprobs":[]}]}}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.ErrKind != "" || o.Text != "NaN is in here" {
					t.Fatalf("%+v", o)
				}
				if o.Logprobs.NonFinite != 2 || o.Logprobs.Null != 0 || o.Logprobs.Tokens != 2 || !o.Logprobs.Bad() {
					t.Errorf("logprobs %+v, want 2 non-finite of 2", o.Logprobs)
				}
			},
		},
		{
			name:  "NaN only among the candidates",
			probe: chatProbe(false, true),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"Rome"},"finish_reason":"stop","logprobs":{"content":[{"token":"Rome","logprob":-0.01,"top_logprobs":[{"token":"Rome","logprob":-0.01},{"token":"Milan","logprob":NaN},{"token":"Turin","logprob":null}]}]}}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				lp := o.Logprobs
				if o.ErrKind != "" || lp == nil || !lp.Bad() || lp.NonFinite != 1 || lp.Null != 1 || lp.Min != -0.01 {
					t.Errorf("%+v: logprobs %+v, want one NaN and one null candidate counted", o, lp)
				}
			},
		},
		{
			name:  "NaN written as a string",
			probe: chatProbe(false, true),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"NaN"},"finish_reason":"stop","logprobs":{"content":[{"token":"NaN","logprob":"NaN","top_logprobs":[{"token":"nan","logprob":"-inf"}]}]}}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.ErrKind != "" || o.Text != "NaN" {
					t.Fatalf("%+v", o)
				}
				if lp := o.Logprobs; lp == nil || lp.NonFinite != 2 || lp.Null != 0 || !lp.Bad() {
					t.Errorf("logprobs %+v, want 2 non-finite", lp)
				}
			},
		},
		{
			name:  "finite logprobs",
			probe: chatProbe(false, true),
			route: reply(`{"choices":[{"message":{"role":"assistant","content":"323"},"finish_reason":"stop","logprobs":{"content":[{"token":"323","logprob":-0.01,"top_logprobs":[]}]}}]}`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.Logprobs == nil || o.Logprobs.Bad() || o.Logprobs.Tokens != 1 {
					t.Errorf("%+v", o.Logprobs)
				}
			},
		},
		{
			name:  "200 with a body that is not a completion",
			probe: chatProbe(false, false),
			route: reply(`<html>proxy</html>`),
			check: func(t *testing.T, o evidence.Observation) {
				if o.ErrKind != evidence.Decode {
					t.Errorf("%+v", o)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeServer(t, map[string]http.HandlerFunc{"POST /v1/chat/completions": tt.route})
			o := runOne(t, srv, tt.probe)
			if o.Probe != "p" || o.Prompt != "What is 300+23?" || o.Expect == nil {
				t.Errorf("observation lost the probe: %+v", o)
			}
			tt.check(t, o)
		})
	}
}

func TestModelInfo(t *testing.T) {
	t.Run("SGLang", func(t *testing.T) {
		srv := fakeServer(t, map[string]http.HandlerFunc{"GET /get_model_info": reply(`{"model_path":"/models/q","is_generation":true}`)})
		o := (&Client{BaseURL: srv.URL}).ModelInfo(context.Background(), "model-info")
		if o.Text != "/models/q" || o.Endpoint != "/get_model_info" || o.Err != "" {
			t.Errorf("%+v", o)
		}
	})
	t.Run("404 falls back to /v1/models", func(t *testing.T) {
		srv := fakeServer(t, map[string]http.HandlerFunc{
			"GET /get_model_info": http.NotFound,
			"GET /model_info":     http.NotFound,
			"GET /v1/models":      reply(`{"object":"list","data":[{"id":"served","object":"model"}]}`),
		})
		o := (&Client{BaseURL: srv.URL}).ModelInfo(context.Background(), "model-info")
		if o.Text != "served" || o.Endpoint != "/v1/models" || o.HTTPStatus != 200 {
			t.Errorf("%+v", o)
		}
	})
	t.Run("404 everywhere", func(t *testing.T) {
		srv := fakeServer(t, map[string]http.HandlerFunc{
			"GET /get_model_info": http.NotFound, "GET /model_info": http.NotFound, "GET /v1/models": http.NotFound,
		})
		o := (&Client{BaseURL: srv.URL}).ModelInfo(context.Background(), "model-info")
		if o.HTTPStatus != 404 || o.ErrKind != evidence.HTTPError {
			t.Errorf("%+v", o)
		}
	})
}

func TestTimeoutAndConnection(t *testing.T) {
	release := make(chan struct{})
	srv := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
	})
	defer close(release)
	c := &Client{BaseURL: srv.URL, Model: "m", Timeout: 200 * time.Millisecond}
	o := c.Run(context.Background(), Set{Probes: []Probe{chatProbe(false, false)}})[0]
	if o.ErrKind != evidence.Timeout {
		t.Errorf("want a timeout: %+v", o)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c = &Client{BaseURL: "http://" + addr, Model: "m", Timeout: time.Second}
	o = c.Run(context.Background(), Set{Probes: []Probe{chatProbe(false, false)}})[0]
	if o.ErrKind != evidence.Connection {
		t.Errorf("want a connection error: %+v", o)
	}
}

// TestBatchIsConcurrent checks that a batch probe's requests are in flight
// together, with their own prompts and expectations.
func TestBatchIsConcurrent(t *testing.T) {
	var mu sync.Mutex
	inflight, peak := 0, 0
	srv := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inflight++
			peak = max(peak, inflight)
			mu.Unlock()
			time.Sleep(500 * time.Millisecond) // long enough that a loaded machine still overlaps them
			mu.Lock()
			inflight--
			mu.Unlock()
			reply(`{"choices":[{"message":{"role":"assistant","content":"1"},"finish_reason":"stop"}]}`)(w, r)
		},
	})
	p := MixedBatch(16)
	obs := (&Client{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second}).Run(context.Background(), Set{Probes: []Probe{p}})
	if len(obs) != 16 {
		t.Fatalf("%d observations", len(obs))
	}
	if peak < 8 {
		t.Errorf("peak concurrency %d: the batch was not sent together", peak)
	}
	lengths := map[int]bool{}
	for i, o := range obs {
		if o.Request != i || o.Expect == nil || o.Expect.Number == nil {
			t.Errorf("observation %d: %+v", i, o)
		}
		lengths[len(o.Prompt)] = true
	}
	if len(lengths) < 8 {
		t.Errorf("only %d distinct prompt lengths", len(lengths))
	}
}

func TestAbortedAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	obs := (&Client{BaseURL: "http://127.0.0.1:1"}).Run(ctx, Smoke())
	if len(obs) != 1+1+1+1+16+1+1 {
		t.Fatalf("%d observations", len(obs))
	}
	for _, o := range obs {
		if o.ErrKind != evidence.Aborted {
			t.Errorf("%s: %+v", o.Probe, o)
		}
	}
}

func TestSanitizeJSON(t *testing.T) {
	in := `{"a":NaN,"b":"NaN \"Infinity\"","c":[-Infinity,Infinity,1]}`
	out, n := SanitizeJSON([]byte(in))
	want := `{"a":null,"b":"NaN \"Infinity\"","c":[null,null,1]}`
	if string(out) != want || n != 3 {
		t.Errorf("got %s (%d)", out, n)
	}
	if !json.Valid(out) {
		t.Error("not valid JSON")
	}
	// A logprob written as a string is a number too; a token that says
	// NaN is text.
	in = `{"token":"NaN","logprob" : "NaN","top_logprobs":[{"token":"Infinity","logprob":"-Infinity"},{"token":"x","logprob":"-inf"}]}`
	out, n = SanitizeJSON([]byte(in))
	want = `{"token":"NaN","logprob" : null,"top_logprobs":[{"token":"Infinity","logprob":null},{"token":"x","logprob":null}]}`
	if string(out) != want || n != 3 {
		t.Errorf("got %s (%d)", out, n)
	}
	same, n := SanitizeJSON([]byte(`{"x":1}`))
	if string(same) != `{"x":1}` || n != 0 {
		t.Errorf("clean input changed: %s", same)
	}
}

func TestSmokeSet(t *testing.T) {
	set := Smoke()
	var names []string
	logprobs := false
	for _, p := range set.Probes {
		names = append(names, p.Name)
		logprobs = logprobs || p.Logprobs
	}
	if got := strings.Join(names, ","); got != "model-info,say-ok,math,math-thinking,batch-mixed,count,sampled" {
		t.Errorf("probes %s", got)
	}
	if !logprobs {
		t.Error("no probe asks for logprobs")
	}
}
