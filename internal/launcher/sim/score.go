package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The sim's chat template (Qwen3's shape) is made of these special tokens;
// the text of a message is its words, the first bare and each later one
// with its leading space, as the sim's generated tokens are.
const (
	imStart    = "<|im_start|>"
	imEnd      = "<|im_end|>"
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	newline    = "\n"
	blankLine  = "\n\n"
)

// tailVocab is how many tokens share the probability a distribution leaves
// outside its candidates: a token the sim does not rank gets its share.
const tailVocab = 1000

// vocab maps the sim's token texts to ids and back. The sim has no fixed
// vocabulary: a text gets the next id the first time it is tokenized, so
// ids are only meaningful to the server that made them (as a real server's
// are to its model).
type vocab struct {
	mu   sync.Mutex
	ids  map[string]int
	toks []string
}

func (v *vocab) id(tok string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if id, ok := v.ids[tok]; ok {
		return id
	}
	if v.ids == nil {
		v.ids = map[string]int{}
	}
	v.ids[tok] = len(v.toks)
	v.toks = append(v.toks, tok)
	return v.ids[tok]
}

func (v *vocab) encode(toks []string) []int {
	ids := make([]int, len(toks))
	for i, t := range toks {
		ids[i] = v.id(t)
	}
	return ids
}

// decode is the texts of ids; an error names the first id the sim never
// gave out.
func (v *vocab) decode(ids []int) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	toks := make([]string, len(ids))
	for i, id := range ids {
		if id < 0 || id >= len(v.toks) {
			return nil, fmt.Errorf("token id %d is out of vocabulary", id)
		}
		toks[i] = v.toks[id]
	}
	return toks, nil
}

// words tokenizes text as the sim's answers are: one token per word, the
// first bare, the others with their leading space.
func words(text string) []string {
	ws := strings.Fields(text)
	for i := 1; i < len(ws); i++ {
		ws[i] = " " + ws[i]
	}
	return ws
}

// render is the sim's chat template over msgs, as token texts. With
// continueFinal the last message (the assistant's) is left open, so a
// model continues it; otherwise the assistant's turn is opened after the
// messages (add_generation_prompt). An assistant turn of a template that
// does not think starts with an empty think block, as Qwen3's does with
// enable_thinking off.
func render(msgs []chatMessage, continueFinal, thinking bool) []string {
	var toks []string
	open := func(role string) {
		toks = append(toks, imStart, role, newline)
		if role == "assistant" && !thinking {
			toks = append(toks, thinkOpen, blankLine, thinkClose, blankLine)
		}
	}
	for i, m := range msgs {
		open(m.Role)
		toks = append(toks, words(m.text())...)
		if continueFinal && i == len(msgs)-1 {
			return toks
		}
		toks = append(toks, imEnd, newline)
	}
	open("assistant")
	return toks
}

// turn is what a sequence of tokens shows the sim's model: the last
// user message, and the assistant's answer so far (from the position
// answerAt on; answerAt is len(toks) when no assistant turn is open).
type turn struct {
	prompt   string
	answerAt int
}

func turnOf(toks []string) turn {
	c := turn{answerAt: len(toks)}
	for i := len(toks) - 3; i >= 0; i-- {
		if toks[i] != imStart || toks[i+2] != newline {
			continue
		}
		switch toks[i+1] {
		case "assistant":
			if c.answerAt == len(toks) && c.prompt == "" {
				at := i + 3
				if at+4 <= len(toks) && slices.Equal(toks[at:at+4], []string{thinkOpen, blankLine, thinkClose, blankLine}) {
					at += 4
				}
				c.answerAt = at
			}
		case "user":
			end := i + 3
			for end < len(toks) && toks[end] != imEnd {
				end++
			}
			c.prompt = strings.Join(toks[i+3:end], "")
			return c
		}
	}
	return c
}

// ownAnswer is the answer the simulated backend gives prompt without
// thinking, as tokens: the responder's (or a fault's fluent variation of
// it), or token salad for a garbage backend (n tokens of it).
func (s *Server) ownAnswer(prompt string, n int) []string {
	if s.rule.Behaviour == Garbage {
		return words(salad(prompt, n))
	}
	answer, _ := respondWith(s.rule.Behaviour, s.rule.Variant, prompt)
	return words(answer)
}

// keepsOwnPath reports a backend whose numbers are broken where its text
// is: it ranks its own answer's token first at every position, whatever
// text it is given. Every other backend's numbers are a healthy model's
// (drifted, or rounded so a near tie flips): once given text off its own
// path, it follows that text.
func (s *Server) keepsOwnPath() bool {
	switch s.rule.Behaviour {
	case Garbage, Wrong, Derail:
		return true
	}
	return false
}

// backend is the seed of a backend combination's rounding.
func (s *Server) backend() string {
	return s.resolved["moe_runner_backend"] + "/" + s.resolved["fp4_gemm_backend"] + "/" + s.resolved["attention_backend"]
}

// next is the sim's next-token distribution after toks[:i], with the
// token at i in view only for where it sits (its index in the answer). In
// an answer it is the distribution the backend would give while
// generating: while the answer so far is the backend's own, the
// distribution of its own next token (the end of turn after its answer),
// so a forced token it would not have chosen gets what the backend leaves
// for it (a near tie's other side, or the tail's share); once the answer
// has left the backend's own path, a healthy model follows the text it is
// given (the forced token is its choice), while a broken one (see
// keepsOwnPath) still ranks its own token first. Jitter and drift apply as
// in logprobs, so a backend scoring its own answer gives the numbers it
// generated it with.
func (s *Server) next(toks []string, i int, c turn, own []string) ([]string, []float64) {
	tok, prev := toks[i], ""
	if i > 0 {
		prev = toks[i-1]
	}
	pos := i
	if i >= c.answerAt {
		pos = i - c.answerAt
		if pos == 0 {
			prev = ""
		}
		onPath := pos <= len(own) && slices.Equal(toks[c.answerAt:i], own[:pos])
		switch {
		case s.keepsOwnPath() && pos < len(own):
			tok = own[pos]
		case onPath && pos < len(own):
			tok = own[pos]
		case onPath:
			tok = imEnd
		}
	}
	cands, ps := distribution(tok, prev, pos, maxTopLogprobs)
	ps = perturb(ps, seeded(s.backend(), tok, prev, pos), jitter)
	if s.rule.Behaviour == Drift {
		ps = drift(ps)
	}
	return cands, ps
}

// logprobOf is the logprob of tok in a distribution: its candidate's, or
// its share of what the candidates leave.
func logprobOf(tok string, cands []string, ps []float64) float64 {
	var sum float64
	for j, c := range cands {
		if c == tok {
			return math.Log(ps[j])
		}
		sum += ps[j]
	}
	return math.Log(max(1-sum, 1e-9) / tailVocab)
}

// tokenizeRequest is SGLang's /v1/tokenize body: a prompt, or messages
// rendered by the chat template.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               json.RawMessage `json:"prompt"`
	Messages             []chatMessage   `json:"messages"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	ChatTemplateKwargs   map[string]any  `json:"chat_template_kwargs"`
}

// tokenize answers SGLang's /v1/tokenize: the token ids of a prompt, or of
// messages through the chat template (with continue_final_message, the
// last message left open for the model to continue).
func (s *Server) tokenize(w http.ResponseWriter, req *http.Request) {
	var r tokenizeRequest
	if err := json.NewDecoder(req.Body).Decode(&r); err != nil {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "invalid request body: "+err.Error())
		return
	}
	hasPrompt := len(r.Prompt) > 0 && string(r.Prompt) != "null"
	if hasPrompt == (r.Messages != nil) {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "Value error, Exactly one of 'prompt' or 'messages' must be provided.")
		return
	}
	var toks []string
	if hasPrompt {
		var p string
		if err := json.Unmarshal(r.Prompt, &p); err != nil {
			errorJSON(w, http.StatusBadRequest, "BadRequestError", "prompt: the simulation tokenizes one string")
			return
		}
		toks = words(p)
	} else {
		if r.ContinueFinalMessage && (len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Role != "assistant") {
			errorJSON(w, http.StatusBadRequest, "BadRequestError", "continue_final_message is set but the last message is not the assistant's")
			return
		}
		toks = render(r.Messages, r.ContinueFinalMessage, s.thinks(r.ChatTemplateKwargs))
	}
	ids := s.vocab.encode(toks)
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ids, "count": len(ids), "max_model_len": 262144})
}

// generateRequest is the part of SGLang's GenerateReqInput the sim reads.
type generateRequest struct {
	Text           *string `json:"text"`
	InputIDs       []int   `json:"input_ids"`
	SamplingParams struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	} `json:"sampling_params"`
	ReturnLogprob        bool `json:"return_logprob"`
	LogprobStartLen      *int `json:"logprob_start_len"`
	TopLogprobsNum       int  `json:"top_logprobs_num"`
	ReturnTextInLogprobs bool `json:"return_text_in_logprobs"`
	Stream               bool `json:"stream"`
}

// generate answers SGLang's native /generate for one prompt (text or
// input_ids): it continues the assistant's answer the prompt opens, and
// with return_logprob gives the logprob of every input token from
// logprob_start_len on, with top_logprobs_num candidates each
// (meta_info.input_token_logprobs and input_top_logprobs, [logprob, id,
// text] triples, the text only with return_text_in_logprobs), and of the
// output tokens likewise. It is how a forced answer is scored: the
// prompt's own tokens are scored by the model that reads them.
func (s *Server) generate(w http.ResponseWriter, req *http.Request) {
	var r generateRequest
	if err := json.NewDecoder(req.Body).Decode(&r); err != nil {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "invalid request body: "+err.Error())
		return
	}
	if (r.Text == nil) == (r.InputIDs == nil) {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "Either text or input_ids should be provided.")
		return
	}
	if r.Stream {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "the simulation does not stream /generate")
		return
	}
	toks, err := r.tokens(&s.vocab)
	if err != nil {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	if s.wedged(req) {
		return
	}
	c := turnOf(toks)
	if !s.admit(w, len(c.prompt), false) {
		return
	}
	if s.rule.Behaviour == NaN && r.ReturnLogprob {
		errorJSON(w, http.StatusInternalServerError, "InternalServerError", "Out of range float values are not JSON compliant")
		return
	}
	maxNew := 128
	if r.SamplingParams.MaxNewTokens != nil {
		maxNew = max(*r.SamplingParams.MaxNewTokens, 0)
	}
	own := s.ownAnswer(c.prompt, len(toks)-c.answerAt+maxNew+1)
	// The output continues the backend's own answer while the answer so
	// far is on it; a prompt that opens no answer, or leaves the
	// backend's path, gets the end of turn.
	out, finish := []string{}, map[string]any{"type": "stop", "matched": imEnd}
	if so := toks[c.answerAt:]; len(so) <= len(own) && slices.Equal(so, own[:len(so)]) {
		out = own[len(so):]
		if len(out) > maxNew {
			out, finish = out[:maxNew], map[string]any{"type": "length", "length": maxNew}
		}
	}
	all := append(slices.Clone(toks), out...)
	ids := s.vocab.encode(all)
	meta := map[string]any{
		"id": fmt.Sprintf("sim-%d", time.Now().UnixNano()), "finish_reason": finish,
		"prompt_tokens": len(toks), "completion_tokens": len(out), "cached_tokens": 0, "simulated": true,
	}
	if r.ReturnLogprob {
		sc := scoring{s: s, r: &r, all: all, ids: ids, c: c, own: own}
		from := len(toks)
		if r.LogprobStartLen != nil && *r.LogprobStartLen >= 0 {
			from = min(*r.LogprobStartLen, len(toks))
		}
		meta["input_token_logprobs"], meta["input_top_logprobs"] = sc.logprobs(from, len(toks))
		meta["output_token_logprobs"], meta["output_top_logprobs"] = sc.logprobs(len(toks), len(all))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"text": strings.Join(out, ""), "output_ids": ids[len(toks):], "meta_info": meta,
	})
}

// tokens are the request's tokens: its text split as the sim tokenizes, or
// its input_ids decoded.
func (r *generateRequest) tokens(v *vocab) ([]string, error) {
	if r.Text != nil {
		return words(*r.Text), nil
	}
	return v.decode(r.InputIDs)
}

// scoring is what a /generate request's logprobs are read from: the
// sequence (prompt and output) with its ids, its turn, and the backend's
// own answer.
type scoring struct {
	s   *Server
	r   *generateRequest
	all []string
	ids []int
	c   turn
	own []string
}

// entry is SGLang's [logprob, id, text] of position i (text null unless
// return_text_in_logprobs).
func (sc scoring) entry(lp any, i int) []any {
	var text any
	if sc.r.ReturnTextInLogprobs {
		text = sc.all[i]
	}
	return []any{lp, sc.ids[i], text}
}

// logprobs are the token logprobs and top-k lists of positions lo..hi-1,
// as SGLang's meta_info gives them.
func (sc scoring) logprobs(lo, hi int) ([]any, []any) {
	k := min(max(sc.r.TopLogprobsNum, 0), maxTopLogprobs)
	lps, tops := []any{}, []any{}
	for i := lo; i < hi; i++ {
		if i == 0 { // nothing comes before the first token to predict it
			lps, tops = append(lps, sc.entry(nil, 0)), append(tops, nil)
			continue
		}
		cands, ps := sc.s.next(sc.all, i, sc.c, sc.own)
		lps = append(lps, sc.entry(logprobOf(sc.all[i], cands, ps), i))
		order := make([]int, len(cands))
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int { return compareDesc(ps[a], ps[b]) })
		top := []any{}
		for _, j := range order[:k] {
			var text any
			if sc.r.ReturnTextInLogprobs {
				text = cands[j]
			}
			top = append(top, []any{math.Log(ps[j]), sc.s.vocab.id(cands[j]), text})
		}
		tops = append(tops, top)
	}
	return lps, tops
}

func compareDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
