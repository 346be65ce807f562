package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/sim"
)

func TestPerfConfigFromFile(t *testing.T) {
	const probe = "[[probe]]\nname = \"p\"\nprompt = \"hi\"\n"
	tests := []struct {
		name, toml string
		want       PerfConfig
		err        string
	}{
		{name: "no [perf]: the defaults", toml: probe, want: DefaultPerf()},
		{name: "off", toml: probe + "[perf]\nenabled = false\n", want: func() PerfConfig { c := DefaultPerf(); c.Enabled = false; return c }()},
		{name: "set", toml: probe + "[perf]\nprompt_tokens = 512\noutput_tokens = 128\nconcurrency = 16\nrequests = 32\nignore_eos = false\nnoise_floor_pct = 25\n",
			want: PerfConfig{Enabled: true, PromptTokens: 512, OutputTokens: 128, Concurrency: 16, Requests: 32, NoiseFloorPct: 25}},
		{name: "a fractional noise floor", toml: probe + "[perf]\nnoise_floor_pct = 2.5\n",
			want: func() PerfConfig { c := DefaultPerf(); c.NoiseFloorPct = 2.5; return c }()},
		{name: "no noise floor", toml: probe + "[perf]\nnoise_floor_pct = 0\n",
			want: func() PerfConfig { c := DefaultPerf(); c.NoiseFloorPct = 0; return c }()},
		{name: "a negative noise floor", toml: probe + "[perf]\nnoise_floor_pct = -1\n", err: "perf.noise_floor_pct -1: want 0 to 100 (percent)"},
		{name: "out of range", toml: probe + "[perf]\noutput_tokens = 0\nconcurrency = 5000\n", err: "perf.output_tokens 0: want 1 to 32768"},
		{name: "unknown key", toml: probe + "[perf]\nconcurency = 8\n", err: "unknown key perf.concurency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "probes.toml")
			if err := os.WriteFile(path, []byte(tt.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			set, err := LoadFile(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, set.Perf); d != "" {
				t.Error(d)
			}
		})
	}
	if !Smoke().Perf.Enabled || (Set{}).Perf.Enabled {
		t.Error("the smoke set measures performance; a bare Set does not")
	}
	if got := (PerfConfig{Concurrency: 1}).Levels(); !cmp.Equal(got, []int{1}) {
		t.Errorf("levels %v", got)
	}
}

// sse is a fake streaming server: it records each request's body and
// answers with the events write produces.
func sse(t *testing.T, write func(w http.ResponseWriter, body map[string]any)) (*Client, *[]map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Error(err)
			}
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
			write(w, body)
		},
	})
	return &Client{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second}, &bodies
}

func event(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

func delta(content string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
	return string(b)
}

// TestPerfStream checks what the probe sends and how it reads a stream:
// tokens from usage (here 3 chunks of text hold 12 tokens), times from
// the chunks with text, every request's prompt different.
func TestPerfStream(t *testing.T) {
	c, bodies := sse(t, func(w http.ResponseWriter, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		event(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
		for _, s := range []string{"four tokens here", " and four more", " and the rest"} {
			time.Sleep(2 * time.Millisecond)
			event(w, delta(s))
		}
		event(w, `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}`)
		event(w, `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	cfg := PerfConfig{Enabled: true, PromptTokens: 32, OutputTokens: 12, Concurrency: 3, Requests: 2, IgnoreEOS: true}
	p := c.Perf(context.Background(), cfg)
	if len(p.Problems) > 0 {
		t.Errorf("problems: %q", p.Problems)
	}
	// A warm-up, 2 requests alone, 3 at concurrency 3 (at least one each).
	if len(*bodies) != 6 || len(p.Levels) != 2 || p.Levels[0].Requests != 2 || p.Levels[1].Requests != 3 || p.Levels[1].Concurrency != 3 {
		t.Fatalf("%d requests, levels %+v", len(*bodies), p.Levels)
	}
	prompts := map[string]bool{}
	for _, b := range *bodies {
		so, _ := b["stream_options"].(map[string]any)
		if b["stream"] != true || so["include_usage"] != true || b["ignore_eos"] != true || b["max_tokens"] != float64(12) || b["model"] != "m" {
			t.Errorf("request %v", b)
		}
		msgs := b["messages"].([]any)
		prompts[msgs[0].(map[string]any)["content"].(string)] = true
	}
	if len(prompts) != 6 {
		t.Errorf("%d distinct prompts in 6 requests: a prefix cache would serve repeats", len(prompts))
	}
	// The warm-up's 40 prompt tokens for 32 words scale the prompts to 26 words.
	first := (*bodies)[1]["messages"].([]any)[0].(map[string]any)["content"].(string)
	if n := len(strings.Fields(first)); n != 26 {
		t.Errorf("counted prompt has %d words, want 26", n)
	}
	for _, l := range p.Levels {
		for _, r := range l.Runs {
			if !r.OK() || r.OutputTokens != 12 || !r.Usage || r.Chunks != 6 || len(r.ITLUS) != 2 || r.FinishReason != "length" || r.PromptTokens != 40 {
				t.Errorf("run %+v", r)
			}
			// Lower bounds that scheduling cannot break: a gap between two
			// chunks as the client reads them can be shorter than the
			// server's sleep when the first was read late.
			if r.TTFTUS < 2000 || r.E2EUS < 6000 || r.E2EUS < r.TTFTUS {
				t.Errorf("times %+v: the server waited 2 ms before each text chunk", r)
			}
		}
		if l.TokensPerSecond.Median <= 0 || l.TotalTokensPerSecond <= 0 || l.TPOTMS.Median <= 0 || l.DecodeTokensPerSecond.Median <= 0 || l.TTFTMS.P90 < l.TTFTMS.Median {
			t.Errorf("level %+v", l)
		}
	}
	if p.PromptTokensSeen != 40 || p.OutputTokens != 12 || !p.IgnoreEOS {
		t.Errorf("perf %+v", p)
	}
}

// TestPerfStreamProblems checks each way a stream can fail to give
// trustworthy figures is recorded, not hidden.
func TestPerfStreamProblems(t *testing.T) {
	cfg := PerfConfig{Enabled: true, PromptTokens: 8, OutputTokens: 16, Concurrency: 1, Requests: 2, IgnoreEOS: true}
	finish := `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	tests := []struct {
		name    string
		write   func(w http.ResponseWriter, body map[string]any)
		problem string
		check   func(t *testing.T, p *evidence.Perf)
	}{
		{
			name: "fewer tokens than asked",
			write: func(w http.ResponseWriter, _ map[string]any) {
				event(w, delta("the end"))
				event(w, finish)
				event(w, `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3}}`)
				fmt.Fprint(w, "data: [DONE]\n\n")
			},
			problem: "2 requests produced fewer tokens than the 16 asked (as few as 3",
			check: func(t *testing.T, p *evidence.Perf) {
				if p.Levels[0].Short != 2 || p.Levels[0].Requests != 2 {
					t.Errorf("level %+v", p.Levels[0])
				}
			},
		},
		{
			name: "no usage: chunks are not tokens",
			write: func(w http.ResponseWriter, _ map[string]any) {
				for range 16 {
					event(w, delta("x"))
				}
				event(w, finish)
				fmt.Fprint(w, "data: [DONE]\n\n")
			},
			problem: "streams had no usage",
			check: func(t *testing.T, p *evidence.Perf) {
				r := p.Levels[0].Runs[0]
				if r.Usage || r.OutputTokens != 0 || r.Chunks != 17 || p.Levels[0].TokensPerSecond.Median != 0 {
					t.Errorf("run %+v, level %+v", r, p.Levels[0])
				}
			},
		},
		{
			name: "error inside the stream",
			write: func() func(w http.ResponseWriter, _ map[string]any) {
				n := 0 // the warm-up passes, then the server fails
				return func(w http.ResponseWriter, _ map[string]any) {
					if n++; n == 1 {
						event(w, delta("x"))
						event(w, finish)
						fmt.Fprint(w, "data: [DONE]\n\n")
						return
					}
					event(w, delta("x"))
					event(w, `{"object":"error","message":"CUDA error: an illegal memory access was encountered","code":500}`)
				}
			}(),
			problem: "2 of 2 requests failed (first: error in stream: CUDA error: an illegal memory access",
			check: func(t *testing.T, p *evidence.Perf) {
				if len(p.Levels) != 1 || p.Levels[0].Runs[0].ErrKind != evidence.HTTPError {
					t.Errorf("levels %+v", p.Levels)
				}
			},
		},
		{
			name: "cut off",
			write: func(w http.ResponseWriter, _ map[string]any) {
				event(w, delta("x"))
			},
			problem: "the stream ended after 1 chunks without a finish reason or [DONE]",
		},
		{
			name: "ignore_eos refused",
			write: func(w http.ResponseWriter, body map[string]any) {
				if body["ignore_eos"] != nil {
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprint(w, `{"error":{"message":"Unrecognized request argument supplied: ignore_eos","type":"invalid_request_error"}}`)
					return
				}
				event(w, delta("x"))
				event(w, finish)
				event(w, `{"choices":[],"usage":{"completion_tokens":16}}`)
				fmt.Fprint(w, "data: [DONE]\n\n")
			},
			problem: "the server refused ignore_eos (Unrecognized request argument supplied: ignore_eos)",
			check: func(t *testing.T, p *evidence.Perf) {
				if p.IgnoreEOS || p.Levels[0].Requests != 2 {
					t.Errorf("perf %+v", p)
				}
			},
		},
		{
			name: "warm-up fails",
			write: func(w http.ResponseWriter, _ map[string]any) {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, `{"object":"error","message":"the scheduler died","code":500}`)
			},
			problem: "warm-up request failed: the scheduler died",
			check: func(t *testing.T, p *evidence.Perf) {
				if len(p.Levels) != 0 || p.Warmup.HTTPStatus != 500 {
					t.Errorf("perf %+v", p)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := sse(t, tt.write)
			p := c.Perf(context.Background(), cfg)
			if !strings.Contains(strings.Join(p.Problems, "\n"), tt.problem) {
				t.Errorf("problems %q, want %q", p.Problems, tt.problem)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
	if (&Client{}).Perf(context.Background(), PerfConfig{}) != nil {
		t.Error("a disabled probe returns nil")
	}
}

// TestPerfAgainstSim measures the simulated server through real HTTP: the
// sim streams the asked-for number of tokens (ignore_eos), and its pacing
// is at least its profile's per-token time.
func TestPerfAgainstSim(t *testing.T) {
	prof, err := sim.ParseProfile("speed.toml", []byte(`name = "speed"
[speed]
first_token_latency = "3ms"
token_latency = "500us"
[[rule]]
when = { fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "correct"
speed = { token_latency = "2ms" }
[[rule]]
when = {}
behaviour = "correct"
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		fp4   string
		token time.Duration
	}{{"flashinfer_cudnn", 500 * time.Microsecond}, {"flashinfer_cutlass", 2 * time.Millisecond}} {
		t.Run(tt.fp4, func(t *testing.T) {
			s := sim.New(sim.Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: tt.fp4, ReasoningParser: "qwen3", TP: 1}, prof, &bytes.Buffer{})
			s.SetReady()
			srv := newHTTPServer(t, s.Handler())
			c := &Client{BaseURL: srv, Timeout: 10 * time.Second}
			cfg := PerfConfig{Enabled: true, PromptTokens: 64, OutputTokens: 24, Concurrency: 4, Requests: 3, IgnoreEOS: true}
			p := c.Perf(context.Background(), cfg)
			if len(p.Problems) > 0 || len(p.Levels) != 2 {
				t.Fatalf("problems %q, levels %d", p.Problems, len(p.Levels))
			}
			if p.PromptTokensSeen < 56 || p.PromptTokensSeen > 72 {
				t.Errorf("prompt of %d tokens, asked 64", p.PromptTokensSeen)
			}
			for _, l := range p.Levels {
				for _, r := range l.Runs {
					if !r.OK() || r.OutputTokens != 24 || r.FinishReason != "length" || r.Chunks < 10 {
						t.Errorf("concurrency %d: %+v", l.Concurrency, r)
					}
					// Lower bounds only: sleeping never ends early. The sim
					// keeps its deadlines from the request's start (a late
					// first token is followed by faster ones), and a piece
					// holds at most 2 tokens, so the last piece leaves no
					// sooner than the first token's latency plus 22 tokens'.
					if r.TTFTUS < 3000 || time.Duration(r.E2EUS)*time.Microsecond < 3*time.Millisecond+22*tt.token {
						t.Errorf("ttft %d us, e2e %d us: faster than the profile's %v per token", r.TTFTUS, r.E2EUS, tt.token)
					}
				}
			}
			t.Logf("%s: c=1 %.0f tok/s per request, c=4 %.0f tok/s in total, TPOT %.2f ms", tt.fp4,
				p.Levels[0].TokensPerSecond.Median, p.Levels[1].TotalTokensPerSecond, p.Levels[0].TPOTMS.Median)
		})
	}
}

func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPerfFiguresAgainstKnownPacing checks TPOT, the decode rate, TTFT and
// tokens/s per request (TTFT included) against servers whose pacing is
// known, through real HTTP: a server that writes one token per event
// every millisecond but sends the events in pairs (two chunks arriving
// together, where a median gap between chunks reads 0 or 2 ms, not 1), and
// the simulated server at its default 1 ms per token. Tolerances are a few
// percent: sleeping ends late, never early, and both servers keep their
// deadlines from the request's start, so lateness does not add up.
func TestPerfFiguresAgainstKnownPacing(t *testing.T) {
	const (
		tokens = 64
		ttft   = 20 * time.Millisecond
		token  = time.Millisecond
	)
	pairedTruth, simTruth := &pacingTruth{tokens: tokens}, &pacingTruth{tokens: tokens}
	paired := fakeServer(t, map[string]http.HandlerFunc{
		"POST /v1/chat/completions": pairedTruth.wrap(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
			for i := 0; i < tokens; i += 2 {
				time.Sleep(time.Until(start.Add(ttft + time.Duration(i)*token)))
				fmt.Fprintf(w, "data: %s\n\ndata: %s\n\n", delta(" a"), delta(" b"))
				w.(http.Flusher).Flush()
			}
			event(w, `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`)
			event(w, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":%d,"total_tokens":%d}}`, tokens, tokens+40))
			fmt.Fprint(w, "data: [DONE]\n\n")
		}),
	})
	s := sim.New(sim.Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", TP: 1}, sim.DefaultProfile(), &bytes.Buffer{})
	s.SetReady()
	simHandler := s.Handler()
	sm := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
			simTruth.wrap(simHandler.ServeHTTP)(w, r)
			return
		}
		simHandler.ServeHTTP(w, r)
	}))
	for _, tt := range []struct {
		name, url string
		truth     *pacingTruth
		// ttft and tpot are the pacing asked for (the paired server's last
		// event leaves 62 ms after its first, 63 tokens later): on a busy
		// host the servers keep it late, so what is checked is the truth
		// each server recorded as it wrote, request by request.
		ttft, tpot time.Duration
		// ttftTol is how far above the truth the measured TTFT may be; 0
		// checks only that it is not below.
		ttftTol float64
	}{
		{"events in pairs", paired.URL, pairedTruth, ttft, 62 * token / 63, 0.15},
		{"sim", sm, simTruth, 4 * time.Millisecond, token, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A busy host can still hold one read up between the server's
			// write and bmx's clock: the figures must hold in one of three.
			var misses []string
			for attempt := 1; attempt <= 3; attempt++ {
				tt.truth.reset()
				misses = checkPacing(t, tt.url, tokens, tt.truth, tt.ttftTol)
				if len(misses) == 0 {
					return
				}
				t.Logf("attempt %d (asked for: TTFT %v, TPOT %v): %s", attempt, tt.ttft, tt.tpot, strings.Join(misses, "; "))
			}
			t.Errorf("off in 3 attempts, the last: %s", strings.Join(misses, "; "))
		})
	}
}

// pacingTruth records, for each chat completion a server streams, when it
// wrote its first and its last chunk with text, after the request came in:
// the TTFT and TPOT the server really kept, which a loaded host makes late
// (and, where deadlines run from the request's start, short after a late
// first token), whatever pacing it was asked for.
type pacingTruth struct {
	tokens     int
	mu         sync.Mutex
	ttft, tpot []float64 // ms, one per request
}

func (p *pacingTruth) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ttft, p.tpot = nil, nil
}

// medians are the medians, in ms, of the TTFT and TPOT recorded for the
// measured requests (the first, the probe's warm-up, left out).
func (p *pacingTruth) medians() (ttft, tpot float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ttft) < 2 {
		return 0, 0
	}
	return evidence.Percentile(slices.Sorted(slices.Values(p.ttft[1:])), 50), evidence.Percentile(slices.Sorted(slices.Values(p.tpot[1:])), 50)
}

func (p *pacingTruth) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tw := &truthWriter{ResponseWriter: w, start: time.Now()}
		h(tw, r)
		if tw.first.IsZero() || !tw.last.After(tw.first) {
			return
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ttft = append(p.ttft, ms(tw.first.Sub(tw.start)))
		p.tpot = append(p.tpot, ms(tw.last.Sub(tw.first))/float64(p.tokens-1))
	}
}

// truthWriter timestamps the writes that hold a chunk with text.
type truthWriter struct {
	http.ResponseWriter
	start, first, last time.Time
}

var textChunkRe = regexp.MustCompile(`"content":"[^"]`)

func (w *truthWriter) Write(b []byte) (int, error) {
	if textChunkRe.Match(b) {
		now := time.Now()
		if w.first.IsZero() {
			w.first = now
		}
		w.last = now
	}
	return w.ResponseWriter.Write(b)
}

func (w *truthWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w *truthWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkPacing measures the server at url at concurrency 1 and says which
// figures are off the truth the server recorded: TTFT to the first token
// (the measured one at least that, and within ttftTol above it when
// ttftTol > 0), TPOT per token after it.
func checkPacing(t *testing.T, url string, tokens int, truth *pacingTruth, ttftTol float64) []string {
	t.Helper()
	c := &Client{BaseURL: url, Model: "m", Timeout: 10 * time.Second}
	p := c.Perf(context.Background(), PerfConfig{Enabled: true, PromptTokens: 32, OutputTokens: tokens, Concurrency: 1, Requests: 5, IgnoreEOS: true})
	if len(p.Problems) > 0 || len(p.Levels) != 1 || p.Levels[0].Requests != 5 {
		t.Fatalf("problems %q, levels %+v", p.Problems, p.Levels)
	}
	l := p.Levels[0]
	var misses []string
	near := func(what string, got, want, tol float64) {
		if d := got/want - 1; d < -tol || d > tol {
			misses = append(misses, fmt.Sprintf("%s %.4g, want %.4g within %.0f%% (off by %+.1f%%)", what, got, want, tol*100, d*100))
		}
	}
	ttft, tpot := truth.medians()
	if tpot <= 0 {
		t.Fatalf("the server recorded no paced stream")
	}
	near("TPOT ms", l.TPOTMS.Median, tpot, 0.05)
	near("decode tok/s", l.DecodeTokensPerSecond.Median, 1000/tpot, 0.05)
	// TTFT is small and absolute lateness weighs more in it; bmx's clock
	// starts before the request leaves and the server's when it arrives.
	if l.TTFTMS.Median < ttft {
		misses = append(misses, fmt.Sprintf("TTFT %.3g ms, sooner than the server's %.3g", l.TTFTMS.Median, ttft))
	}
	if ttftTol > 0 {
		near("TTFT ms", l.TTFTMS.Median, ttft, ttftTol)
	}
	// Tokens/s per request counts the first token's wait as it was.
	e2e := l.TTFTMS.Median + float64(tokens-1)*tpot
	near("tok/s per request incl. TTFT", l.TokensPerSecond.Median, float64(tokens)/(e2e/1000), 0.05)
	var gaps []float64
	for _, r := range l.Runs {
		for _, g := range r.ITLUS {
			gaps = append(gaps, float64(g)/1000)
		}
	}
	slices.Sort(gaps)
	t.Logf("TPOT %.3f ms (the server's %.3f; the median gap between chunks, not reported, %.3f), decode %.0f tok/s, %.0f tok/s per request incl. TTFT (truth %.0f at its TTFT), TTFT %.2f ms (the server's %.2f)",
		l.TPOTMS.Median, tpot, evidence.Percentile(gaps, 50), l.DecodeTokensPerSecond.Median, l.TokensPerSecond.Median, float64(tokens)/(e2e/1000), l.TTFTMS.Median, ttft)
	return misses
}
