package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
	"golang.org/x/sync/errgroup"
)

// PerfConfig is the performance probe's settings: a probe file's [perf]
// table, or DefaultPerf.
type PerfConfig struct {
	// Enabled runs the probe; a probe file turns it off with
	// enabled = false.
	Enabled bool
	// PromptTokens is the prompt's approximate length, OutputTokens the
	// max_tokens of every request.
	PromptTokens int
	OutputTokens int
	// Concurrency is the higher level; every cell is also measured at 1.
	Concurrency int
	// Requests is how many requests are counted at each level (at least
	// Concurrency at the higher one).
	Requests int
	// IgnoreEOS sends ignore_eos, so the model writes OutputTokens tokens
	// whatever it would say (SGLang, vLLM and llama-server read it).
	IgnoreEOS bool
	// NoiseFloorPct is how much two cells' speeds vary between two
	// starts of the same server, in percent: a cell is reported faster
	// than another only when it is more than this ahead (and their
	// spreads apart). The probe records it with the figures; the report
	// applies it.
	NoiseFloorPct float64
}

// DefaultPerf is the probe's default: on, small enough to add well under a
// second per cell on the simulated host, and a few seconds on a real one.
func DefaultPerf() PerfConfig {
	return PerfConfig{Enabled: true, PromptTokens: 128, OutputTokens: 64, Concurrency: 4, Requests: 4, IgnoreEOS: true,
		NoiseFloorPct: evidence.DefaultNoiseFloorPct}
}

// Limits of a [perf] table: beyond them a typo, not a measurement.
const (
	maxPerfTokens      = 32768
	maxPerfConcurrency = 1024
	maxPerfRequests    = 10000
	maxNoiseFloorPct   = 100
)

// Levels are the concurrencies measured, in order.
func (c PerfConfig) Levels() []int {
	if c.Concurrency <= 1 {
		return []int{1}
	}
	return []int{1, c.Concurrency}
}

// rawPerf is the [perf] table of a probe file; nil fields take
// DefaultPerf's values.
type rawPerf struct {
	Enabled      *bool `toml:"enabled"`
	PromptTokens *int  `toml:"prompt_tokens"`
	OutputTokens *int  `toml:"output_tokens"`
	Concurrency  *int  `toml:"concurrency"`
	Requests     *int  `toml:"requests"`
	IgnoreEOS    *bool `toml:"ignore_eos"`
	// NoiseFloorPct takes an integer or a fraction (5, 2.5).
	NoiseFloorPct *float64 `toml:"noise_floor_pct"`
}

// perfConfig applies the defaults to a [perf] table and checks it.
func (r *rawPerf) perfConfig() (PerfConfig, []string) {
	c := DefaultPerf()
	if r == nil {
		return c, nil
	}
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	if r.Enabled != nil {
		c.Enabled = *r.Enabled
	}
	if r.IgnoreEOS != nil {
		c.IgnoreEOS = *r.IgnoreEOS
	}
	set(&c.PromptTokens, r.PromptTokens)
	set(&c.OutputTokens, r.OutputTokens)
	set(&c.Concurrency, r.Concurrency)
	set(&c.Requests, r.Requests)
	if r.NoiseFloorPct != nil {
		c.NoiseFloorPct = *r.NoiseFloorPct
	}
	var bad []string
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			bad = append(bad, fmt.Sprintf("perf.%s %d: want %d to %d", name, v, lo, hi))
		}
	}
	check("prompt_tokens", c.PromptTokens, 1, maxPerfTokens)
	check("output_tokens", c.OutputTokens, 1, maxPerfTokens)
	check("concurrency", c.Concurrency, 1, maxPerfConcurrency)
	check("requests", c.Requests, 1, maxPerfRequests)
	if f := c.NoiseFloorPct; !(f >= 0 && f <= maxNoiseFloorPct) {
		bad = append(bad, fmt.Sprintf("perf.noise_floor_pct %g: want 0 to %d (percent)", f, maxNoiseFloorPct))
	}
	return c, bad
}

// Perf measures the server's serving speed with streaming chat completions
// (stream_options.include_usage, and ignore_eos unless the server refuses
// it): one warm-up request, not counted, then cfg.Requests requests at
// concurrency 1 and as many at cfg.Concurrency. It returns nil when cfg is
// not enabled. Failures are recorded in the result, never returned: a
// cell whose answers were right and whose streaming is broken still has
// its verdict, and its Perf says what went wrong.
//
// Call it after the correctness probes, on a server whose verdict is
// correct or degraded.
func (c *Client) Perf(ctx context.Context, cfg PerfConfig) *evidence.Perf {
	if !cfg.Enabled {
		return nil
	}
	model := c.Model
	if model == "" {
		model, _ = c.resolveModel(ctx) // a server that timed out times out the warm-up too
	}
	floor := cfg.NoiseFloorPct
	p := &evidence.Perf{PromptTokens: cfg.PromptTokens, OutputTokens: cfg.OutputTokens, IgnoreEOS: cfg.IgnoreEOS, NoiseFloorPct: &floor, Levels: []evidence.PerfLevel{}}
	words := cfg.PromptTokens
	p.Warmup = c.stream(ctx, model, perfPrompt(0, words), cfg.OutputTokens, p.IgnoreEOS)
	if p.IgnoreEOS && p.Warmup.ErrKind == evidence.HTTPError && p.Warmup.HTTPStatus == http.StatusBadRequest {
		// An engine that does not know ignore_eos may refuse the request
		// (a strict OpenAI-style validator); ask again without it.
		refused := p.Warmup.Err
		p.IgnoreEOS = false
		p.Warmup = c.stream(ctx, model, perfPrompt(0, words), cfg.OutputTokens, false)
		if p.Warmup.OK() {
			p.Problems = append(p.Problems, fmt.Sprintf("the server refused ignore_eos (%s): requests may stop before %d tokens", clipText(refused, 120), cfg.OutputTokens))
		}
	}
	if !p.Warmup.OK() {
		p.Problems = append(p.Problems, "warm-up request failed: "+clipText(p.Warmup.Err, 300))
		return p
	}
	// The prompt is words, about a token each; the warm-up says how many
	// tokens they made (chat template included), so the counted requests
	// are scaled once to the asked-for length.
	if n := p.Warmup.PromptTokens; n > 0 {
		words = max(1, int(math.Round(float64(words)*float64(cfg.PromptTokens)/float64(n))))
	}
	next := 1 // prompt index: each request's prompt differs, so no prefix cache serves it
	for _, conc := range cfg.Levels() {
		if ctx.Err() != nil {
			p.Problems = append(p.Problems, "interrupted before concurrency "+fmt.Sprint(conc))
			break
		}
		n := cfg.Requests
		if conc > 1 {
			n = max(n, conc)
		}
		l := c.level(ctx, model, conc, n, next, words, cfg.OutputTokens, p.IgnoreEOS)
		next += n
		p.Levels = append(p.Levels, l)
		p.Problems = append(p.Problems, levelProblems(l, cfg.OutputTokens)...)
		if l.Requests == 0 {
			break // the server answers nothing; the next level would only time out
		}
	}
	var seen []float64
	for _, l := range p.Levels {
		for _, r := range l.Runs {
			if r.OK() && r.PromptTokens > 0 {
				seen = append(seen, float64(r.PromptTokens))
			}
		}
	}
	if len(seen) > 0 {
		slices.Sort(seen)
		p.PromptTokensSeen = int(math.Round(evidence.Percentile(seen, 50)))
	}
	return p
}

// level sends n requests, conc at a time.
func (c *Client) level(ctx context.Context, model string, conc, n, first, words, outTokens int, ignoreEOS bool) evidence.PerfLevel {
	runs := make([]evidence.PerfRequest, n)
	var g errgroup.Group
	g.SetLimit(conc)
	start := time.Now()
	for i := range n {
		g.Go(func() error {
			runs[i] = c.stream(ctx, model, perfPrompt(first+i, words), outTokens, ignoreEOS)
			return nil
		})
	}
	_ = g.Wait() // stream records failures in its result; it never errors
	return evidence.SummarizeLevel(conc, outTokens, runs, time.Since(start))
}

// levelProblems says what makes a level's figures doubtful.
func levelProblems(l evidence.PerfLevel, asked int) []string {
	var out []string
	at := fmt.Sprintf("at concurrency %d", l.Concurrency)
	if l.Failed > 0 {
		first := ""
		for _, r := range l.Runs {
			if !r.OK() {
				first = clipText(r.Err, 200)
				break
			}
		}
		out = append(out, fmt.Sprintf("%s %d of %d requests failed (first: %s)", at, l.Failed, l.Failed+l.Requests, first))
	}
	noUsage := 0
	least := asked
	for _, r := range l.Runs {
		if r.OK() && !r.Usage {
			noUsage++
		}
		if r.OK() && r.Usage {
			least = min(least, r.OutputTokens)
		}
	}
	if noUsage > 0 {
		out = append(out, fmt.Sprintf("%s %d requests' streams had no usage: their token counts and tokens/s are unknown", at, noUsage))
	}
	if l.Short > 0 {
		out = append(out, fmt.Sprintf("%s %d requests produced fewer tokens than the %d asked (as few as %d, by the server's usage count)", at, l.Short, asked, least))
	}
	for _, r := range l.Runs {
		if r.OK() && r.Usage && r.OutputTokens > asked {
			out = append(out, fmt.Sprintf("%s a request produced %d tokens where max_tokens was %d", at, r.OutputTokens, asked))
			break
		}
	}
	return out
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// perfWords are common English words, each one token in the usual BPE
// vocabularies, so a prompt of n of them is about n tokens long.
var perfWords = strings.Fields(`the of and to in is was for on that with as it by at from this be are
or an have not had but one all were when which their there would been has more time will about who
out up so can like into them other than then some its could only over new also after two first way
well year back any these most work life day made part long place where good same great old end
house world still should small home high water hand light name line city kind head side door night`)

// perfPrompt is request i's prompt: words from a sequence seeded by i, so
// each request's prompt differs from its first word (a prefix cache does
// not shorten its prefill) and a rerun sends the same prompts.
func perfPrompt(i, words int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 0x626d78))
	var b strings.Builder
	for j := range words {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(perfWords[rng.IntN(len(perfWords))])
	}
	return b.String()
}

// stream sends one streaming chat completion and times its chunks. go-openai
// has no ignore_eos and hides each chunk's arrival time behind its own
// reader, so the request and the server-sent events are handled here.
func (c *Client) stream(ctx context.Context, model, prompt string, maxTokens int, ignoreEOS bool) evidence.PerfRequest {
	var r evidence.PerfRequest
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	body := map[string]any{
		"model":          model,
		"messages":       []Message{{Role: "user", Content: prompt}},
		"max_tokens":     maxTokens,
		"temperature":    GreedyTemperature,
		"seed":           Seed,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		// A thinking template would spend the budget on reasoning; its
		// tokens would be timed all the same, but a plain answer is what
		// the prompt length was calibrated for.
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
	}
	if ignoreEOS {
		body["ignore_eos"] = true
	}
	payload, err := json.Marshal(body)
	if err != nil {
		r.Err, r.ErrKind = err.Error(), evidence.Decode
		return r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+"/v1/chat/completions", bytes.NewReader(payload))
	if err != nil {
		r.Err, r.ErrKind = err.Error(), evidence.Connection
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer bmx")
	start := time.Now()
	resp, err := c.http().Do(req)
	if err != nil {
		r.Err, r.ErrKind = err.Error(), errKind(ctx, err)
		return r
	}
	defer resp.Body.Close()
	r.HTTPStatus = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		r.Err, r.ErrKind = errorBody(b), evidence.HTTPError
		return r
	}
	err = readStream(resp.Body, start, maxTokens, &r)
	r.E2EUS = time.Since(start).Microseconds()
	switch {
	case err == nil:
	case errors.Is(err, errStreamError):
		r.ErrKind = evidence.HTTPError
	case errors.Is(err, errBadChunk), errors.Is(err, errEndless):
		r.ErrKind = evidence.Decode
	default:
		r.ErrKind = errKind(ctx, err)
	}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

var (
	errStreamError = errors.New("error in stream")
	errBadChunk    = errors.New("bad chunk")
	errEndless     = errors.New("bmx cut the stream")
)

// maxChunk bounds one server-sent event line.
const maxChunk = 1 << 20

// streamLimits are how many chunks with text, and how many events in all,
// a stream of maxTokens tokens may send before bmx stops reading it. Every
// OpenAI-compatible server sends a token or more in a chunk with text, and
// a few events without (the role, the finish reason, the usage); a stream
// far past either is a server that does not stop at max_tokens, or one
// that chatters without end, and reading it to the probe timeout measures
// nothing.
func streamLimits(maxTokens int) (text, events int) {
	return 4*maxTokens + 64, 16*maxTokens + 1024
}

// chunk is what bmx reads of a chat.completion.chunk.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     *int `json:"prompt_tokens"`
		CompletionTokens *int `json:"completion_tokens"`
	} `json:"usage"`
	// Error is an error sent inside the stream: vLLM's and llama-server's
	// {"error": {...}}, or SGLang's flat {"object": "error", "message"}.
	Error  json.RawMessage `json:"error"`
	Object string          `json:"object"`
}

// readStream reads server-sent events until [DONE] or the end of the body,
// timing the chunks that carry text. Each data line is taken as one event,
// as every OpenAI-compatible server writes them; the time of a chunk is
// when its line arrived. What it keeps is bounded whatever the stream: the
// gaps between chunks in a GapRecorder, and a stream past streamLimits is
// cut with an error that says so.
func readStream(body io.Reader, start time.Time, maxTokens int, r *evidence.PerfRequest) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var last time.Time
	var gaps evidence.GapRecorder
	defer func() { r.ITLUS, r.ITL = gaps.Kept() }()
	maxText, maxEvents := streamLimits(maxTokens)
	done, finished, texts := false, false, 0
	for !done {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) && finished {
				break // a server that ends the stream without [DONE]
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("the stream ended after %d chunks without a finish reason or [DONE]", r.Chunks)
			}
			return err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments, event: and id: lines
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		now := time.Now()
		clean, _ := SanitizeJSON(data)
		var ch chunk
		if err := json.Unmarshal(clean, &ch); err != nil {
			return fmt.Errorf("%w: %v: %s", errBadChunk, err, clipText(string(data), 200))
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" || ch.Object == "error" {
			return fmt.Errorf("%w: %s", errStreamError, errorBody(data))
		}
		r.Chunks++
		if u := ch.Usage; u != nil && u.CompletionTokens != nil {
			r.Usage, r.OutputTokens = true, *u.CompletionTokens
			if u.PromptTokens != nil {
				r.PromptTokens = *u.PromptTokens
			}
		}
		text := false
		for _, c := range ch.Choices {
			d := c.Delta
			for _, s := range []*string{d.Content, d.ReasoningContent, d.Reasoning} {
				text = text || s != nil && *s != ""
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				r.FinishReason, finished = *c.FinishReason, true
			}
		}
		if text {
			if texts++; last.IsZero() {
				r.TTFTUS = now.Sub(start).Microseconds()
			} else {
				gaps.Add(now.Sub(last).Microseconds())
			}
			last = now
		}
		switch {
		case texts >= maxText && !finished:
			return fmt.Errorf("%w after %d chunks with text without an end: the server does not stop at max_tokens %d", errEndless, texts, maxTokens)
		case r.Chunks >= maxEvents:
			return fmt.Errorf("%w after %d events (%d with text) without an end, for max_tokens %d", errEndless, r.Chunks, texts, maxTokens)
		}
	}
	if last.IsZero() {
		return fmt.Errorf("the stream carried no text in %d chunks", r.Chunks)
	}
	return nil
}

// readLine reads one line without its line ending; a line longer than
// maxChunk is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxChunk {
			return nil, fmt.Errorf("%w: an event line over %d bytes", errBadChunk, maxChunk)
		}
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return bytes.TrimRight(line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}
