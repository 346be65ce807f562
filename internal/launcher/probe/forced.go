package probe

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Methods of teacher-forced scoring (evidence.Forced.Method): the request
// shape a server was asked in. Both put the reference's answer after the
// same messages, as the assistant's open final message, through the
// server's own chat template, and read the server's logprobs of the
// answer's tokens with its top-k at each.
const (
	// ForceSGLang is SGLang's: POST /v1/tokenize with the messages and
	// continue_final_message (the chat template's token ids, the answer
	// left open), then the native POST /generate of those input_ids with
	// return_logprob, logprob_start_len just before the answer's first
	// token, top_logprobs_num and return_text_in_logprobs; the scores are
	// the last entries of meta_info.input_token_logprobs and
	// input_top_logprobs.
	ForceSGLang = "sglang-generate"
	// ForceVLLMChat is vLLM's: one POST /v1/chat/completions with the
	// answer as the final assistant message, continue_final_message,
	// add_generation_prompt false, prompt_logprobs (vLLM's extension) and
	// max_tokens 1; the scores are the reply's prompt_logprobs.
	ForceVLLMChat = "vllm-chat-prompt-logprobs"
)

// errUnsupported is a server that does not answer a scoring method: no
// such endpoint, or a reply without the scores (a server that ignores
// the fields it does not know).
var errUnsupported = errors.New("the server does not answer this scoring method")

// forceMethods are the methods to try for an engine, in order: its own
// for SGLang (and bmx's simulated SGLang) and vLLM, both for a server of
// unknown engine (the first it answers is kept), none for an engine known
// not to score given tokens.
func forceMethods(engine string) []string {
	switch engine {
	case "sglang", "sim":
		return []string{ForceSGLang}
	case "vllm":
		return []string{ForceVLLMChat}
	case "":
		return []string{ForceSGLang, ForceVLLMChat}
	}
	return nil
}

// Scorer scores reference answers on one server, teacher-forced (see
// evidence.Forced). It is made per server: which method the server
// answers is learnt from its first answer and kept, and a server that
// answers none is asked no more.
type Scorer struct {
	c       *Client
	model   string
	methods []string
}

// Scorer is a scorer on c's server.
func (c *Client) Scorer() *Scorer {
	return &Scorer{c: c, model: c.Model, methods: forceMethods(c.Engine)}
}

// Forceable reports whether a cell's answer o to a request of p can be
// scored on the reference's answer ref: a greedy chat request that does not
// think, answered by the cell, whose reference answer has top-k logprobs
// to compare with. A thinking answer's tokens are the reasoning's too,
// which the chat template would not put in the assistant's message.
func Forceable(p Probe, o, ref evidence.Observation) bool {
	return p.Kind == evidence.Chat && !p.Thinking && (p.Temperature == nil || *p.Temperature == 0) &&
		o.Answered() && ref.Answered() && ref.Temperature == nil && !ref.Thinking &&
		ref.Logprobs != nil && len(ref.Logprobs.Steps) > 0 && len(ref.Logprobs.Steps[0].Top) > 0
}

// Score asks the server for its logprobs of ref's tokens (the reference
// cell against's greedy answer to request i of p), each after the same
// messages and the answer's tokens before it. The result's Err says why
// the server could not score them; nil means the server scores no given
// tokens (its engine cannot, or it answered none of the methods), and the
// cell is compared as before forcing.
func (s *Scorer) Score(ctx context.Context, p Probe, i int, ref evidence.Observation, against string) *evidence.Forced {
	if len(s.methods) == 0 || i >= len(p.Requests) {
		return nil
	}
	toks := make([]string, len(ref.Logprobs.Steps))
	for j, st := range ref.Logprobs.Steps {
		toks[j] = st.Token
	}
	answer := strings.Join(toks, "")
	if strings.ContainsRune(answer, utf8.RuneError) {
		return &evidence.Forced{Against: against, Err: "the reference's tokens do not spell its answer (a character split across tokens): not scored"}
	}
	if s.model == "" {
		var err error
		if s.model, err = s.c.resolveModel(ctx); err != nil {
			return &evidence.Forced{Against: against, Err: "ask the model's name: " + err.Error()}
		}
	}
	msgs := make([]map[string]string, 0, len(p.Requests[i].Messages)+1)
	for _, m := range p.Requests[i].Messages {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
	}
	msgs = append(msgs, map[string]string{"role": "assistant", "content": answer})
	k := p.TopLogprobs
	if k <= 0 {
		k = DefaultTopLogprobs
	}
	for len(s.methods) > 0 {
		m := s.methods[0]
		var steps []evidence.Step
		var err error
		switch m {
		case ForceSGLang:
			steps, err = s.sglang(ctx, msgs, toks, k)
		case ForceVLLMChat:
			steps, err = s.vllmChat(ctx, msgs, toks, k)
		}
		if errors.Is(err, errUnsupported) {
			s.methods = s.methods[1:]
			continue
		}
		f := &evidence.Forced{Against: against, Method: m}
		if err != nil {
			f.Err = err.Error()
			return f
		}
		s.methods = []string{m}
		f.Steps = steps
		if len(f.Steps) > evidence.MaxSteps {
			f.Steps = f.Steps[:evidence.MaxSteps]
		}
		return f
	}
	return nil
}

// post sends body as JSON to path and returns the reply, its non-finite
// literals made null (see SanitizeJSON). A 404, 405 or 501 is
// errUnsupported; any other status but 200 an error with the server's
// message.
func (c *Client) post(ctx context.Context, path string, body any) ([]byte, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("POST %s: %w", path, err)
	case len(reply) > MaxReply:
		return nil, fmt.Errorf("POST %s: the reply is over %d MiB", path, MaxReply>>20)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return nil, fmt.Errorf("POST %s: HTTP %d: %w", path, resp.StatusCode, errUnsupported)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, errorBody(reply))
	}
	clean, _ := SanitizeJSON(reply)
	return clean, nil
}

// sglang scores toks with SGLang's /v1/tokenize and /generate (ForceSGLang).
func (s *Scorer) sglang(ctx context.Context, msgs []map[string]string, toks []string, k int) ([]evidence.Step, error) {
	reply, err := s.c.post(ctx, "/v1/tokenize", map[string]any{
		"model": s.model, "messages": msgs, "continue_final_message": true,
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
	})
	if err != nil {
		return nil, err
	}
	var tok struct {
		Tokens []int `json:"tokens"`
	}
	if json.Unmarshal(reply, &tok) != nil || tok.Tokens == nil {
		return nil, fmt.Errorf("POST /v1/tokenize: no token ids in the reply: %w", errUnsupported)
	}
	n := len(toks)
	if len(tok.Tokens) <= n {
		return nil, fmt.Errorf("the chat template renders the conversation in %d tokens, no more than the answer's %d", len(tok.Tokens), n)
	}
	reply, err = s.c.post(ctx, "/generate", map[string]any{
		"input_ids":       tok.Tokens,
		"sampling_params": map[string]any{"max_new_tokens": 1, "temperature": 0},
		// One position before the answer's first token: the answer is read
		// from the end, so where a server's first entry falls (a null
		// logprob for the first token asked, or none) does not matter.
		"return_logprob": true, "logprob_start_len": len(tok.Tokens) - n - 1, "top_logprobs_num": k,
		"return_text_in_logprobs": true,
	})
	if err != nil {
		return nil, err
	}
	var gen struct {
		MetaInfo struct {
			InputTokenLogprobs []json.RawMessage `json:"input_token_logprobs"`
			InputTopLogprobs   []json.RawMessage `json:"input_top_logprobs"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal(reply, &gen); err != nil {
		return nil, fmt.Errorf("POST /generate: decode the reply: %w", err)
	}
	lps, tops := gen.MetaInfo.InputTokenLogprobs, gen.MetaInfo.InputTopLogprobs
	if lps == nil {
		return nil, fmt.Errorf("POST /generate: no meta_info.input_token_logprobs in the reply: %w", errUnsupported)
	}
	if len(lps) < n || len(tops) < n {
		return nil, fmt.Errorf("POST /generate: %d input logprobs and %d top lists for an answer of %d tokens", len(lps), len(tops), n)
	}
	// The answer is the prompt's last n tokens: read from the end, so a
	// server that returns more than asked is still read right.
	lps, tops = lps[len(lps)-n:], tops[len(tops)-n:]
	steps := make([]evidence.Step, n)
	for j := range n {
		if steps[j], err = sglangStep(lps[j], tops[j], toks[j], j); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// sglangStep reads answer token j's step, want, from its
// input_token_logprobs and input_top_logprobs entries.
func sglangStep(lpRaw, topRaw json.RawMessage, want string, j int) (evidence.Step, error) {
	st := evidence.Step{Token: want}
	lp, text, err := sglangTriple(lpRaw)
	if err != nil {
		return st, fmt.Errorf("POST /generate: input_token_logprobs of answer token %d: %w", j, err)
	}
	if text == nil {
		return st, errors.New("POST /generate: the logprobs have no token text (return_text_in_logprobs)")
	}
	if *text != want {
		return st, mismatch(j, *text, want)
	}
	if lp == nil {
		return st, nil // null: a non-finite logprob; no candidates to compare
	}
	st.Logprob = *lp
	var top []json.RawMessage
	if err := json.Unmarshal(topRaw, &top); err != nil {
		return st, fmt.Errorf("POST /generate: input_top_logprobs of answer token %d: %w", j, err)
	}
	for _, e := range top {
		lp, text, err := sglangTriple(e)
		if err != nil {
			return st, fmt.Errorf("POST /generate: input_top_logprobs of answer token %d: %w", j, err)
		}
		if lp != nil && text != nil {
			st.Top = append(st.Top, evidence.Alt{Token: *text, Logprob: max(*lp, minLogprob)})
		}
	}
	return st, nil
}

// sglangTriple reads one of SGLang's [logprob, token id, text] entries;
// the logprob and the text may be null.
func sglangTriple(raw json.RawMessage) (lp *float64, text *string, err error) {
	var t []json.RawMessage
	if err := json.Unmarshal(raw, &t); err != nil || len(t) < 3 {
		return nil, nil, fmt.Errorf("not a [logprob, id, text] entry: %.60s", raw)
	}
	if err := json.Unmarshal(t[0], &lp); err != nil {
		return nil, nil, fmt.Errorf("logprob %s: %w", t[0], err)
	}
	if err := json.Unmarshal(t[2], &text); err != nil {
		return nil, nil, fmt.Errorf("text %s: %w", t[2], err)
	}
	return lp, text, nil
}

// mismatch is a server whose template or tokenizer split the answer
// otherwise than it was generated: position j would be scored on another
// context than the reference's, so nothing is recorded.
func mismatch(j int, got, want string) error {
	return fmt.Errorf("the server tokenizes the reference's answer otherwise: token %d is %q where the reference generated %q", j, got, want)
}

// vllmChat scores toks with vLLM's chat completion and prompt_logprobs
// (ForceVLLMChat).
func (s *Scorer) vllmChat(ctx context.Context, msgs []map[string]string, toks []string, k int) ([]evidence.Step, error) {
	seed := Seed
	reply, err := s.c.post(ctx, "/v1/chat/completions", map[string]any{
		"model": s.model, "messages": msgs, "add_generation_prompt": false, "continue_final_message": true,
		"max_tokens": 1, "temperature": GreedyTemperature, "seed": seed, "prompt_logprobs": k,
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
	})
	if err != nil {
		return nil, err
	}
	var chat struct {
		PromptLogprobs []json.RawMessage `json:"prompt_logprobs"`
	}
	if err := json.Unmarshal(reply, &chat); err != nil {
		return nil, fmt.Errorf("POST /v1/chat/completions: decode the reply: %w", err)
	}
	n := len(toks)
	if chat.PromptLogprobs == nil {
		return nil, fmt.Errorf("POST /v1/chat/completions: no prompt_logprobs in the reply: %w", errUnsupported)
	}
	if len(chat.PromptLogprobs) <= n {
		return nil, fmt.Errorf("POST /v1/chat/completions: %d prompt logprobs for an answer of %d tokens after the messages", len(chat.PromptLogprobs), n)
	}
	pls := chat.PromptLogprobs[len(chat.PromptLogprobs)-n:]
	steps := make([]evidence.Step, n)
	for j := range n {
		if steps[j], err = vllmStep(pls[j], toks[j], j, k); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// vllmStep reads answer token j's step, want, from its prompt_logprobs
// entry: a map from token id to {logprob, rank, decoded_token}, the top-k
// and the prompt's own token when it is not among them.
func vllmStep(raw json.RawMessage, want string, j, k int) (evidence.Step, error) {
	st := evidence.Step{Token: want}
	var cands map[string]struct {
		Logprob      *float64 `json:"logprob"`
		Rank         *int     `json:"rank"`
		DecodedToken *string  `json:"decoded_token"`
	}
	if err := json.Unmarshal(raw, &cands); err != nil {
		return st, fmt.Errorf("POST /v1/chat/completions: prompt_logprobs of answer token %d: %w", j, err)
	}
	type cand struct {
		id, rank int
		tok      string
		lp       *float64
	}
	var cs []cand
	for id, c := range cands {
		if c.DecodedToken == nil {
			return st, errors.New("POST /v1/chat/completions: the prompt logprobs have no decoded_token")
		}
		tid, _ := strconv.Atoi(id)
		r := k + 1
		if c.Rank != nil {
			r = *c.Rank
		}
		cs = append(cs, cand{id: tid, rank: r, tok: *c.DecodedToken, lp: c.Logprob})
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id)) })
	// The prompt's token is the one outside the top-k if there is one (it
	// was added for being the prompt's), else the top-k's own.
	at := -1
	for x, c := range cs {
		if c.tok == want && (at < 0 || c.rank > k) {
			at = x
		}
	}
	if at < 0 {
		if len(cs) > 0 && cs[len(cs)-1].rank > k {
			return st, mismatch(j, cs[len(cs)-1].tok, want)
		}
		return st, fmt.Errorf("the server tokenizes the reference's answer otherwise: no candidate of token %d is the reference's %q", j, want)
	}
	if cs[at].lp == nil {
		return st, nil
	}
	st.Logprob = *cs[at].lp
	for _, c := range cs {
		if c.rank <= k && c.lp != nil {
			st.Top = append(st.Top, evidence.Alt{Token: c.tok, Logprob: max(*c.lp, minLogprob)})
		}
	}
	return st, nil
}
