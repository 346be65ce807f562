package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// batchSlowdown is how much slower each stream gets per other stream in
// flight: four concurrent streams each run at 1/1.45 of one alone, and
// together at 2.8 times its rate, roughly what a GPU's batched decode
// gives at small batch sizes.
const batchSlowdown = 0.15

// reply is a generated answer, ready to send either way.
type reply struct {
	answer, reasoning, finish string
	// prompt and completion are the usage counts.
	prompt, completion int
}

// piece is one chunk of a stream: a word of the answer or of the
// reasoning, with the tokens it stands for.
type piece struct {
	field, text string
	tokens      int
}

// eosFiller is what the simulated model writes after its answer when asked
// to ignore the end of sequence.
var eosFiller = strings.Fields(`The simulated model keeps writing because the request asked it to ignore
the end of its answer, one word after another, until it has written as many tokens as the request allows.`)

// continueAnswer lengthens answer with filler until it is at least n
// tokens, as a model that ignores its end-of-sequence token keeps going.
func continueAnswer(answer string, n int) string {
	words := strings.Fields(answer)
	for i := 0; tokens(strings.Join(words, " ")) < n; i++ {
		words = append(words, eosFiller[i%len(eosFiller)])
	}
	if len(words) == 0 {
		return answer
	}
	return strings.Join(words, " ")
}

// pieces splits a reply into chunks as SGLang streams it: the reasoning in
// reasoning_content when a reasoning parser is set (else inline in <think>
// tags), then the answer. Each word is a chunk; its tokens are what the
// sim's tokenizer counts for it, the last cut so they add up to the usage
// count. A word-less run of marks ("!!!!") is a chunk per mark.
func (s *Server) pieces(rp reply) []piece {
	var out []piece
	total := 0
	add := func(field, text string) {
		words := strings.Fields(text)
		if len(words) == 1 && len(words[0]) > 8 && strings.Trim(words[0], words[0][:1]) == "" {
			for _, c := range words[0] {
				out = append(out, piece{field, string(c), 1})
				total++
			}
			return
		}
		prev := 0
		for i, w := range words {
			if i > 0 {
				w = " " + w
			}
			n := (4*(i+1) + 2) / 3
			out = append(out, piece{field, w, n - prev})
			total += n - prev
			prev = n
		}
	}
	answer := rp.answer
	switch {
	case rp.reasoning != "" && s.opts.ReasoningParser != "":
		add("reasoning_content", rp.reasoning)
	case rp.reasoning != "":
		answer = "<think>\n" + rp.reasoning + "\n</think>\n\n" + answer
	}
	add("content", answer)
	// Cut the pieces' tokens down to the usage count, from the end.
	for i := len(out) - 1; i >= 0 && total > rp.completion; i-- {
		cut := min(out[i].tokens, total-rp.completion)
		out[i].tokens -= cut
		total -= cut
	}
	return out
}

// pace is d stretched by the streams in flight now.
func (s *Server) pace(d time.Duration) time.Duration {
	others := max(s.streams.Load()-1, 0)
	return time.Duration(float64(d) * (1 + batchSlowdown*float64(others)))
}

// stream writes a reply as server-sent chat.completion.chunk events in
// SGLang's shape: a first chunk with the role, a chunk per word paced by the
// backend's speed (first token after FirstToken, each next after Token per
// token it holds), a chunk with the finish reason, the usage in a last
// chunk with no choices when stream_options.include_usage asks for it,
// then [DONE]. Deadlines are kept from the start, so a late wake-up does
// not slow the rest: the rate is the profile's, give or take the
// scheduler.
func (s *Server) stream(w http.ResponseWriter, req *http.Request, r *chatRequest, rp reply) {
	s.streams.Add(1)
	defer s.streams.Add(-1)
	start := time.Now()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	id, created := fmt.Sprintf("sim-%d", start.UnixNano()), start.Unix()
	send := func(choices []any, usage any) bool {
		b, err := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": r.Model, "system_fingerprint": "bmx-sim (simulated)", "choices": choices, "usage": usage})
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	if !send(choice(map[string]any{"role": "assistant", "content": ""}, nil), nil) {
		return
	}
	due := start.Add(s.pace(s.speed.FirstToken.Duration))
	for _, p := range s.pieces(rp) {
		if !sleepUntil(req.Context(), due) {
			return
		}
		if !send(choice(map[string]any{p.field: p.text}, nil), nil) {
			return
		}
		due = due.Add(s.pace(s.speed.Token.Duration * time.Duration(p.tokens)))
	}
	if !send(choice(map[string]any{}, rp.finish), nil) {
		return
	}
	if r.StreamOptions != nil && r.StreamOptions.IncludeUsage {
		usage := map[string]any{"prompt_tokens": rp.prompt, "completion_tokens": rp.completion, "total_tokens": rp.prompt + rp.completion,
			"reasoning_tokens": tokens(rp.reasoning)}
		if !send([]any{}, usage) {
			return
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// sleepUntil waits until t or until ctx is done (the client went away).
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	return sleep(ctx, d)
}
