package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/launcher/probe"
)

// streamed is what a client reads of one streamed reply.
type streamed struct {
	content, reasoning, finish string
	chunks, textChunks         int
	usage                      map[string]any
	done                       bool
}

// postStream sends a chat request over HTTP and reads its events as a
// client does.
func postStream(t *testing.T, url string, req map[string]any) streamed {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out streamed
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if out.done {
			t.Fatalf("event after [DONE]: %s", data)
		}
		if data == "[DONE]" {
			out.done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("object %q", ch.Object)
		}
		out.chunks++
		for _, c := range ch.Choices {
			out.content += c.Delta.Content
			out.reasoning += c.Delta.ReasoningContent
			if c.Delta.Content != "" || c.Delta.ReasoningContent != "" {
				out.textChunks++
			}
			if c.FinishReason != nil {
				out.finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			if out.usage != nil || len(ch.Choices) != 0 {
				t.Errorf("usage must come once, in a last chunk without choices: %s", data)
			}
			out.usage = ch.Usage
		}
	}
	return out
}

// TestStream checks the sim streams what it answers whole: the same text,
// the reasoning apart, usage only when asked, and ignore_eos taking the
// answer to max_tokens.
func TestStream(t *testing.T) {
	_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", ReasoningParser: "qwen3", TP: 1})
	msg := func(p string) []any { return []any{map[string]any{"role": "user", "content": p}} }
	usage := map[string]any{"include_usage": true}
	noThink := map[string]any{"enable_thinking": false}

	s := postStream(t, srv.URL, map[string]any{"messages": msg("Count from 1 to 20"), "max_tokens": 100, "stream": true, "stream_options": usage, "chat_template_kwargs": noThink})
	want, _ := respond("Count from 1 to 20")
	if s.content != want || s.reasoning != "" || s.finish != "stop" || !s.done || s.textChunks != 20 {
		t.Errorf("count: %+v", s)
	}
	if s.usage["completion_tokens"] != float64(tokens(want)) || s.usage["prompt_tokens"] != float64(tokens("Count from 1 to 20")) {
		t.Errorf("usage %v", s.usage)
	}
	// More tokens than text chunks: a chunk is a word, a word 1 or 2 tokens.
	if tokens(want) <= s.textChunks {
		t.Errorf("%d tokens in %d chunks: the probe must count usage, not chunks", tokens(want), s.textChunks)
	}

	s = postStream(t, srv.URL, map[string]any{"messages": msg("What is 300+23?"), "max_tokens": 200, "stream": true})
	if !strings.Contains(s.content, "323") || !strings.Contains(s.reasoning, "300+23") || s.usage != nil || !s.done {
		t.Errorf("thinking: %+v", s)
	}

	s = postStream(t, srv.URL, map[string]any{"messages": msg("Say 'OK'"), "max_tokens": 50, "stream": true, "stream_options": usage,
		"ignore_eos": true, "chat_template_kwargs": noThink})
	if !strings.HasPrefix(s.content, "OK The simulated model keeps writing") || s.finish != "length" || s.usage["completion_tokens"] != float64(50) {
		t.Errorf("ignore_eos: %q %s %v", s.content, s.finish, s.usage)
	}
	s = postStream(t, srv.URL, map[string]any{"messages": msg("Say 'OK'"), "max_tokens": 50, "stream": true, "stream_options": usage, "chat_template_kwargs": noThink})
	if s.content != "OK" || s.finish != "stop" || s.usage["completion_tokens"] != float64(2) {
		t.Errorf("without ignore_eos: %q %s %v", s.content, s.finish, s.usage)
	}
}

// TestStreamGarbage checks a broken backend streams its garbage too.
func TestStreamGarbage(t *testing.T) {
	_, srv, _ := serve(t, Options{ModelPath: "/m", MoERunner: "flashinfer_cutedsl", FP4Gemm: "flashinfer_cudnn", TP: 1})
	s := postStream(t, srv.URL, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Say 'OK'"}}, "max_tokens": 40, "stream": true,
		"stream_options": map[string]any{"include_usage": true}})
	if s.content == "" || strings.Contains(s.content, "OK") || s.finish != "length" || s.usage["completion_tokens"] == nil {
		t.Errorf("%+v", s)
	}
}

// TestProfileSpeed checks the embedded profile gives its backends
// different speeds, and that speeds are checked.
func TestProfileSpeed(t *testing.T) {
	p := DefaultProfile()
	speed := func(moe, fp4 string) Speed {
		return p.SpeedOf(p.Rule(p.Resolve(Options{MoERunner: moe, FP4Gemm: fp4, TP: 8})))
	}
	ok, drift := speed("flashinfer_cutlass", "flashinfer_cudnn"), speed("flashinfer_cutedsl", "flashinfer_cutedsl")
	if ok.Token.Duration != time.Millisecond || drift.Token.Duration != 700*time.Microsecond || drift.FirstToken.Duration != 3*time.Millisecond {
		t.Errorf("correct %v, drift %v", ok, drift)
	}
	if _, err := ParseProfile("p.toml", []byte("name = \"x\"\n[[rule]]\nwhen = {}\nbehaviour = \"correct\"\nspeed = { token_latency = \"-1ms\" }\n")); err == nil || !strings.Contains(err.Error(), "negative speed") {
		t.Errorf("got %v", err)
	}
}

// BenchmarkSimStream reports the sim's streaming figures per backend of the
// embedded profile, as the performance probe measures them.
func BenchmarkSimStream(b *testing.B) {
	for _, combo := range [][2]string{{"flashinfer_cutlass", "flashinfer_cudnn"}, {"flashinfer_cutedsl", "flashinfer_cutedsl"}} {
		b.Run(combo[0]+"+"+combo[1], func(b *testing.B) {
			s := New(Options{ModelPath: "/m", MoERunner: combo[0], FP4Gemm: combo[1], TP: 8}, DefaultProfile(), &bytes.Buffer{})
			s.SetReady()
			srv := newServer(b, s.Handler())
			c := &probe.Client{BaseURL: srv, Timeout: 10 * time.Second}
			var c1, c4, total float64
			for b.Loop() {
				p := c.Perf(context.Background(), probe.DefaultPerf())
				if len(p.Problems) > 0 {
					b.Fatal(p.Problems)
				}
				c1 += p.Levels[0].TokensPerSecond.Median
				c4 += p.Levels[1].TokensPerSecond.Median
				total += p.Levels[1].TotalTokensPerSecond
			}
			n := float64(b.N)
			b.ReportMetric(c1/n, "tok/s/req@1")
			b.ReportMetric(c4/n, "tok/s/req@4")
			b.ReportMetric(total/n, "tok/s@4")
		})
	}
}

func newServer(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}
