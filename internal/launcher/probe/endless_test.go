package probe

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// TestPerfStreamBounded: what the perf probe keeps of a stream is bounded
// whatever the server sends. A server that streams text past max_tokens,
// or chunks without text, without end, is cut (the request fails, and the
// problems say so) long before the probe timeout; a long stream that does
// end keeps its first evidence.KeepGaps gaps and a summary of all of them.
// Before the cut, an endless stream was read until the timeout and every gap
// kept (40 s: 5.5 million gaps, 548 MB, an 11 MB results line).
func TestPerfStreamBounded(t *testing.T) {
	endless := func(data string) func(http.ResponseWriter, map[string]any) {
		return func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
					return
				}
				if http.NewResponseController(w).Flush() != nil {
					return
				}
			}
		}
	}
	for _, tt := range []struct {
		name, data, cut string
	}{
		{"text past max_tokens", delta(" on"), "bmx cut the stream after 320 chunks with text without an end: the server does not stop at max_tokens 64"},
		{"chunks without text", delta(""), "bmx cut the stream after 2048 events (0 with text) without an end, for max_tokens 64"},
		{"finished, then on", `{"choices":[{"index":0,"delta":{"content":" on"},"finish_reason":"length"}]}`, "bmx cut the stream after 2048 events (2048 with text)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := sse(t, endless(tt.data))
			c.Timeout = 30 * time.Second
			start := time.Now()
			p := c.Perf(context.Background(), PerfConfig{Enabled: true, PromptTokens: 16, OutputTokens: 64, Concurrency: 2, Requests: 2, IgnoreEOS: true})
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the probe took %v: it read the stream until the timeout", took)
			}
			w := p.Warmup
			if w.OK() || w.ErrKind != evidence.Decode || !strings.Contains(w.Err, tt.cut) || len(w.ITLUS) > evidence.KeepGaps {
				t.Errorf("warm-up %s %q with %d gaps kept: want a decode failure %q", w.ErrKind, w.Err, len(w.ITLUS), tt.cut)
			}
			if len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "warm-up request failed: "+tt.cut) {
				t.Errorf("problems %q: want the warm-up's cut", p.Problems)
			}
		})
	}

	t.Run("long and ending", func(t *testing.T) {
		t.Parallel()
		const tokens = 3000
		c, _ := sse(t, func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "text/event-stream")
			event(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
			for range tokens {
				event(w, delta(" on"))
			}
			event(w, `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`)
			event(w, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":%d}}`, tokens))
			fmt.Fprint(w, "data: [DONE]\n\n")
		})
		p := c.Perf(context.Background(), PerfConfig{Enabled: true, PromptTokens: 16, OutputTokens: tokens, Concurrency: 1, Requests: 1, IgnoreEOS: true})
		if len(p.Problems) > 0 || len(p.Levels) != 1 || p.Levels[0].Requests != 1 {
			t.Fatalf("problems %q, levels %+v", p.Problems, p.Levels)
		}
		r := p.Levels[0].Runs[0]
		s := r.ITL
		if len(r.ITLUS) != evidence.KeepGaps || s == nil || s.Count != tokens-1 || !s.Approx || s.MinUS > s.P50US || s.P50US > s.P99US || s.P99US > s.MaxUS {
			t.Errorf("%d gaps kept, summary %+v: want %d kept of %d, percentiles from the histogram", len(r.ITLUS), s, evidence.KeepGaps, tokens-1)
		}
	})
}
