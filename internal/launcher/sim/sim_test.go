package sim

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
)

func TestParseArgs(t *testing.T) {
	o, err := ParseArgs([]string{"--model-path", "/m", "--port=31000", "--tp", "8", "--moe-runner-backend", "flashinfer_cutlass", "--trust-remote-code", "--reasoning-parser", "qwen3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.ModelPath != "/m" || o.Port != 31000 || o.TP != 8 || o.MoERunner != "flashinfer_cutlass" || o.FP4Gemm != "auto" || !o.TrustRemoteCode || o.ReasoningParser != "qwen3" {
		t.Errorf("%+v", o)
	}
	tests := map[string]struct {
		args []string
		want string
	}{
		"unknown flag":   {[]string{"--model-path", "m", "--bogus", "1"}, "unrecognized arguments: --bogus 1"},
		"invalid choice": {[]string{"--model-path", "m", "--fp4-gemm-backend", "cudnn"}, "argument --fp4-gemm-backend: invalid choice: 'cudnn' (choose from 'auto', 'flashinfer_cudnn'"},
		"missing value":  {[]string{"--model-path"}, "argument --model-path/--model: expected one argument"},
		"bad int":        {[]string{"--model-path", "m", "--port", "x"}, "argument --port: invalid int value: 'x'"},
		"required":       {[]string{"--port", "1"}, "the following arguments are required: --model-path"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseArgs(tt.args)
			var ae *ArgError
			if !errors.As(err, &ae) || !strings.Contains(ae.Msg, tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestMainUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--model-path", "m", "--moe-runner-backend", "nope"}, &out, &errb); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), "sglang serve: error: argument --moe-runner-backend: invalid choice: 'nope'") || !strings.HasPrefix(errb.String(), "usage: ") {
		t.Errorf("stderr:\n%s", errb.String())
	}
}

// TestSM120Profile checks the embedded profile gives the story's grid.
func TestSM120Profile(t *testing.T) {
	p := DefaultProfile()
	want := map[[2]string]string{
		{"flashinfer_cutlass", "flashinfer_cudnn"}:   Correct,
		{"flashinfer_cutlass", "flashinfer_cutlass"}: NaNBatch,
		{"flashinfer_cutlass", "flashinfer_cutedsl"}: Hang,
		{"flashinfer_cutlass", "flashinfer_trtllm"}:  Crash,
		{"flashinfer_trtllm", "flashinfer_cudnn"}:    Crash,
		{"flashinfer_cutedsl", "flashinfer_cudnn"}:   Garbage,
		{"flashinfer_cutedsl", "flashinfer_cutedsl"}: Drift,
		{"flashinfer_cutedsl", "flashinfer_trtllm"}:  Crash,
		{"auto", "auto"}:   Correct, // auto resolves to cutlass + cudnn
		{"triton", "auto"}: Crash,
	}
	for combo, behaviour := range want {
		o := Options{MoERunner: combo[0], FP4Gemm: combo[1], TP: 8}
		if got := p.Rule(p.Resolve(o)).Behaviour; got != behaviour {
			t.Errorf("%v: %s, want %s", combo, got, behaviour)
		}
	}
}

func TestParseProfileErrors(t *testing.T) {
	_, err := ParseProfile("p.toml", []byte("name = \"x\"\nbogus = 1\n[[rule]]\nwhen = { moe = \"a\" }\nbehaviour = \"explode\"\n"))
	for _, want := range []string{"unknown key bogus", `unknown behaviour "explode"`, `cannot match on "moe"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// serve runs a ready sim in-process for the probe client.
func serve(t *testing.T, o Options) (*Server, *httptest.Server, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	s := New(o, DefaultProfile(), &syncWriter{w: &log})
	s.SetReady()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv, &log
}

// syncWriter lets the test read a log the handler's goroutines write.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func judge(t *testing.T, srv *httptest.Server) classify.Judgement {
	t.Helper()
	c := &probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second}
	return classify.Cell(classify.Input{Observations: c.Run(context.Background(), probe.Smoke())})
}

// TestSimAgainstProbes runs the real smoke set against each behaviour the
// handler produces by itself.
func TestSimAgainstProbes(t *testing.T) {
	t.Run("correct, thinking split by the reasoning parser", func(t *testing.T) {
		_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", ReasoningParser: "qwen3", TP: 1})
		c := &probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second}
		obs := c.Run(context.Background(), probe.Smoke())
		j := classify.Cell(classify.Input{Observations: obs})
		if j.Verdict != classify.Correct {
			t.Fatalf("%s: %s", j.Verdict, j.Reason)
		}
		for _, o := range obs {
			if o.Probe == "math-thinking" && (o.Reasoning == "" || strings.Contains(o.Text, "<think>") || !strings.Contains(o.Text, "323")) {
				t.Errorf("thinking probe: text %q reasoning %q", o.Text, o.Reasoning)
			}
			if o.Probe == "math" && o.Reasoning != "" {
				t.Errorf("non-thinking probe got reasoning %q", o.Reasoning)
			}
		}
	})
	t.Run("correct, think tags in content without a parser", func(t *testing.T) {
		_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", TP: 1})
		if j := judge(t, srv); j.Verdict != classify.Correct {
			t.Fatalf("%s: %s", j.Verdict, j.Reason)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutedsl", FP4Gemm: "flashinfer_cutlass", TP: 1})
		if j := judge(t, srv); j.Verdict != classify.Garbage {
			t.Fatalf("%s: %s", j.Verdict, j.Reason)
		}
	})
	t.Run("drift: the answers pass, the logprobs part from the reference", func(t *testing.T) {
		p, err := ParseProfile("drift.toml", []byte(`name = "drift"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
behaviour = "drift"
[[rule]]
when = {}
behaviour = "correct"
`))
		if err != nil {
			t.Fatal(err)
		}
		smoke := func(moe, fp4 string) []evidence.Observation {
			s := New(Options{ModelPath: "/m", MoERunner: moe, FP4Gemm: fp4, ReasoningParser: "qwen3", TP: 1}, p, &bytes.Buffer{})
			s.SetReady()
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			c := &probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second}
			return c.Run(context.Background(), probe.Smoke())
		}
		refObs := smoke("flashinfer_cutlass", "flashinfer_cudnn")
		ref := &classify.Reference{Cell: "reference", Observations: refObs}
		steps := 0
		for _, o := range refObs {
			if o.Logprobs != nil {
				steps += len(o.Logprobs.Steps)
				for _, st := range o.Logprobs.Steps {
					if len(st.Top) != probe.DefaultTopLogprobs || st.Top[0].Token != st.Token || st.Logprob != st.Top[0].Logprob || st.Logprob >= 0 {
						t.Fatalf("%s: step %+v: want the chosen token first of %d candidates", o.Probe, st, probe.DefaultTopLogprobs)
					}
					for i := 1; i < len(st.Top); i++ {
						if st.Top[i].Logprob > st.Top[i-1].Logprob {
							t.Fatalf("%s: candidates out of order: %+v", o.Probe, st.Top)
						}
					}
				}
			}
		}
		if steps < 50 {
			t.Fatalf("the reference has %d steps with top_logprobs", steps)
		}
		// The same combination served again has the same numerics; the
		// drifting one the same answers and a divergence far above the
		// threshold.
		if j := classify.Cell(classify.Input{Observations: smoke("flashinfer_cutlass", "flashinfer_cudnn"), Reference: ref}); j.Verdict != classify.Correct || j.Numerics == nil || j.Numerics.KL != 0 {
			t.Errorf("the reference's own combination: %s (%s), numerics %+v", j.Verdict, j.Reason, j.Numerics)
		}
		obs := smoke("flashinfer_cutedsl", "flashinfer_cudnn")
		if j := classify.Cell(classify.Input{Observations: obs}); j.Verdict != classify.Correct {
			t.Fatalf("without a reference the drifting backend should pass: %s (%s)", j.Verdict, j.Reason)
		}
		j := classify.Cell(classify.Input{Observations: obs, Reference: ref})
		t.Logf("drift: %s", j.Reason)
		if j.Verdict != classify.Degraded || j.Numerics == nil || j.Numerics.KL < 5*classify.DegradedKL || j.Numerics.FirstDiff != nil {
			t.Errorf("%s (%s), numerics %+v", j.Verdict, j.Reason, j.Numerics)
		}
	})
	t.Run("healthy backends differ by a little", func(t *testing.T) {
		p, err := ParseProfile("two.toml", []byte("name = \"two\"\n[[rule]]\nwhen = {}\nbehaviour = \"correct\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		run := func(fp4 string) []evidence.Observation {
			s := New(Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: fp4, TP: 1}, p, &bytes.Buffer{})
			s.SetReady()
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			return (&probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second}).Run(context.Background(), probe.Smoke())
		}
		ref := &classify.Reference{Cell: "a", Observations: run("flashinfer_cudnn")}
		j := classify.Cell(classify.Input{Observations: run("flashinfer_cutlass"), Reference: ref})
		if j.Numerics != nil {
			t.Logf("healthy: KL %.3g nats/token over %d tokens", j.Numerics.KL, j.Numerics.Compared)
		}
		if j.Verdict != classify.Correct || j.Numerics == nil || j.Numerics.KL <= 0 || j.Numerics.KL > classify.DegradedKL/10 {
			t.Errorf("%s (%s), numerics %+v", j.Verdict, j.Reason, j.Numerics)
		}
	})
	t.Run("nan under a mixed batch", func(t *testing.T) {
		s, srv, log := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cutlass", TP: 1})
		var died atomic.Bool
		s.OnDeath(func() { died.Store(true) })
		c := &probe.Client{BaseURL: srv.URL, Timeout: 10 * time.Second}
		alone := c.Run(context.Background(), probe.Set{Probes: probe.Smoke().Probes[:4]})
		if j := classify.Cell(classify.Input{Observations: alone}); j.Verdict != classify.Correct || died.Load() {
			t.Fatalf("single requests should work: %s %s", j.Verdict, j.Reason)
		}
		c.Run(context.Background(), probe.Set{Probes: []probe.Probe{probe.MixedBatch(16)}})
		if !died.Load() {
			t.Fatal("the mixed batch did not kill the server")
		}
		j := classify.Cell(classify.Input{Log: log.String(), Exit: &evidence.Exit{Code: -1, Signal: "SIGKILL"}})
		if j.Verdict != classify.NaN {
			t.Errorf("log judged %s: %s\n%s", j.Verdict, j.Reason, log.String())
		}
	})
	t.Run("nan profile", func(t *testing.T) {
		p, err := ParseProfile("nan.toml", []byte("name = \"n\"\n[[rule]]\nwhen = {}\nbehaviour = \"nan\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{ModelPath: "/m", TP: 1}, p, &bytes.Buffer{})
		s.SetReady()
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		j := judge(t, srv)
		if j.Verdict != classify.NaN || !strings.Contains(j.Evidence, "Out of range float values") {
			t.Fatalf("%s: %s (%s)", j.Verdict, j.Reason, j.Evidence)
		}
	})
	t.Run("health is 503 until ready", func(t *testing.T) {
		s := New(Options{ModelPath: "/m", TP: 1}, DefaultProfile(), &bytes.Buffer{})
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		if code := get(t, srv.URL+"/health"); code != 503 {
			t.Errorf("warming: %d", code)
		}
		s.SetReady()
		if code := get(t, srv.URL+"/health"); code != 200 {
			t.Errorf("ready: %d", code)
		}
	})
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRespond(t *testing.T) {
	tests := map[string]string{
		"Say 'OK'":        "OK",
		"What is 300+23?": "300 + 23 = **323**",
		"What is 12*3? Answer with the number only.": "36",
		"Count from 1 to 5":                          "1, 2, 3, 4, 5",
	}
	for prompt, want := range tests {
		if got, _ := respond(prompt); got != want {
			t.Errorf("respond(%q) = %q, want %q", prompt, got, want)
		}
	}
	if a, _ := respond("Once upon a time"); !strings.Contains(a, "simulated") {
		t.Errorf("fallback answer should say it is simulated: %q", a)
	}
}
