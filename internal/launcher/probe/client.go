package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
	openai "github.com/sashabaranov/go-openai"
	"golang.org/x/sync/errgroup"
)

// GreedyTemperature is sent for greedy decoding. go-openai drops
// Temperature 0 from the JSON (the field is omitempty), and a server that
// receives no temperature falls back to the model's generation_config,
// usually sampling. 1e-7 is below SGLang's (1e-6) and vLLM's (1e-5) sampling
// epsilons, so both treat it as greedy.
const GreedyTemperature float32 = 1e-7

// Seed is sent with every request so reruns are comparable where sampling
// happens anyway.
const Seed = 1234

// Client sends probes to one server.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:30000.
	BaseURL string
	// Model is the model name to request; empty means ask /v1/models.
	Model string
	// Timeout bounds each request.
	Timeout time.Duration
	// HTTP is the transport; nil means a default client.
	HTTP *http.Client
	// Engine ("sglang", "vllm", "" for unknown) picks where model info is
	// asked first.
	Engine string
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Run sends the probes in order (a probe's own requests concurrently) and
// returns one observation per request. It stops sending once ctx is done,
// recording the rest as aborted, so a server that died mid-set is not
// hammered with connection errors.
func (c *Client) Run(ctx context.Context, set Set) []evidence.Observation {
	var obs []evidence.Observation
	model := c.Model
	for _, p := range set.Probes {
		if ctx.Err() != nil {
			obs = append(obs, aborted(p)...)
			continue
		}
		if p.Kind == evidence.ModelInfo {
			o := c.ModelInfo(ctx, p.Name)
			obs = append(obs, o)
			continue
		}
		if model == "" {
			var err error
			if model, err = c.resolveModel(ctx); err != nil {
				// A server that cannot say its model's name in time would
				// not answer the probe in time either: the probe timed out.
				obs = append(obs, unsent(p, "ask the model's name: "+err.Error(), evidence.Timeout)...)
				continue
			}
		}
		obs = append(obs, c.chat(ctx, model, p)...)
	}
	return obs
}

// Generate sends a one-token chat completion and reports whether it
// succeeded: SGLang's /health can pass before a generation can.
func (c *Client) Generate(ctx context.Context) error {
	model := c.Model
	if model == "" {
		var err error
		if model, err = c.resolveModel(ctx); err != nil {
			return fmt.Errorf("ask the model's name: %w", err)
		}
	}
	p := Chat("ready", "Hi", nil, 1, 1)
	o := c.chatOne(ctx, model, p, 0, p.Requests[0])
	if o.ErrKind != "" {
		return fmt.Errorf("one-token generation: %s", o.Err)
	}
	return nil
}

func aborted(p Probe) []evidence.Observation {
	return unsent(p, "not sent: the server was gone or bmx was interrupted", evidence.Aborted)
}

// unsent records each of p's requests as not sent, with why and the kind of
// error that kept it from being sent.
func unsent(p Probe, why string, kind evidence.ErrorKind) []evidence.Observation {
	if p.Kind == evidence.ModelInfo {
		return []evidence.Observation{{Probe: p.Name, Kind: p.Kind, Err: why, ErrKind: kind}}
	}
	var out []evidence.Observation
	for i, r := range p.Requests {
		o := newObservation(p, i, r)
		o.Err, o.ErrKind = why, kind
		out = append(out, o)
	}
	return out
}

func newObservation(p Probe, i int, r Request) evidence.Observation {
	return evidence.Observation{
		Probe: p.Name, Kind: p.Kind, Request: i, Prompt: lastUser(r.Messages), Expect: r.Expect,
		Thinking: p.Thinking, MaxTokens: p.MaxTokens, Temperature: p.Temperature,
	}
}

func lastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// modelInfoPaths are tried in order: SGLang's (deprecated in newer builds but
// still served), its newer name, then the OpenAI list every server has.
var modelInfoPaths = []string{"/get_model_info", "/model_info", "/v1/models"}

// ModelInfo asks the server which model it serves. The observation's Text is
// the model path; a server without any of the endpoints gives a 404 status.
func (c *Client) ModelInfo(ctx context.Context, name string) evidence.Observation {
	o := evidence.Observation{Probe: name, Kind: evidence.ModelInfo}
	start := time.Now()
	defer func() { o.LatencyMS = time.Since(start).Milliseconds() }()
	paths := modelInfoPaths
	if c.Engine == "vllm" {
		paths = []string{"/v1/models"} // vLLM has no SGLang info endpoints
	}
	for _, path := range paths {
		body, status, err := c.get(ctx, path)
		o.Endpoint, o.HTTPStatus = path, status
		if err != nil {
			o.Err, o.ErrKind = err.Error(), errKind(ctx, err)
			return o
		}
		if status == http.StatusNotFound {
			continue
		}
		if status != http.StatusOK {
			o.Err, o.ErrKind = errorBody(body), evidence.HTTPError
			return o
		}
		var info struct {
			ModelPath string `json:"model_path"`
			Data      []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &info); err != nil {
			o.Err, o.ErrKind = fmt.Sprintf("decode %s: %v", path, err), evidence.Decode
			return o
		}
		o.Text = info.ModelPath
		if o.Text == "" && len(info.Data) > 0 {
			o.Text = info.Data[0].ID
		}
		return o
	}
	o.Err, o.ErrKind = "no model info endpoint: "+strings.Join(paths, ", ")+" all answered 404", evidence.HTTPError
	return o
}

// resolveModel asks the server the name of the model it serves, and falls
// back to "default" when the list does not say; the error is the request's
// when the server gave no answer within the timeout (the name is then
// "default" too).
func (c *Client) resolveModel(ctx context.Context) (string, error) {
	body, status, err := c.get(ctx, "/v1/models")
	if err != nil && errKind(ctx, err) == evidence.Timeout {
		return "default", fmt.Errorf("GET /v1/models: %w", err)
	}
	if err == nil && status == http.StatusOK {
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &list) == nil && len(list.Data) > 0 {
			return list.Data[0].ID, nil
		}
	}
	return "default", nil
}

func (c *Client) get(ctx context.Context, path string) ([]byte, int, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return body, resp.StatusCode, err
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Timeout > 0 {
		return context.WithTimeout(ctx, c.Timeout)
	}
	return context.WithCancel(ctx)
}

func (c *Client) chat(ctx context.Context, model string, p Probe) []evidence.Observation {
	out := make([]evidence.Observation, len(p.Requests))
	var g errgroup.Group
	for i, r := range p.Requests {
		g.Go(func() error {
			out[i] = c.chatOne(ctx, model, p, i, r)
			return nil
		})
	}
	_ = g.Wait() // chatOne records failures in its observation; it never errors
	return out
}

func (c *Client) chatOne(ctx context.Context, model string, p Probe, i int, r Request) evidence.Observation {
	o := newObservation(p, i, r)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()

	rec := &recorder{doer: c.http()}
	cfg := openai.DefaultConfig("bmx")
	cfg.BaseURL = strings.TrimRight(c.BaseURL, "/") + "/v1"
	cfg.HTTPClient = rec
	client := openai.NewClientWithConfig(cfg)

	msgs := make([]openai.ChatCompletionMessage, len(r.Messages))
	for j, m := range r.Messages {
		msgs[j] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	seed := Seed
	temperature := GreedyTemperature
	if p.Temperature != nil && *p.Temperature > 0 {
		temperature = *p.Temperature
	}
	req := openai.ChatCompletionRequest{
		Model:    model,
		Messages: msgs,
		// max_tokens, not max_completion_tokens: every SGLang, vLLM and
		// llama-server version takes it; older ones ignore the newer name.
		//lint:ignore SA1019 deliberately the field inference servers read
		MaxTokens:   p.MaxTokens,
		Temperature: temperature,
		Seed:        &seed,
		LogProbs:    p.Logprobs || p.TopLogprobs > 0,
		TopLogProbs: p.TopLogprobs,
		// Thinking is set explicitly either way: Qwen3-style templates think
		// by default, which would eat a plain probe's token budget.
		ChatTemplateKwargs: map[string]any{"enable_thinking": p.Thinking},
	}
	start := time.Now()
	resp, err := client.CreateChatCompletion(ctx, req)
	o.LatencyMS = time.Since(start).Milliseconds()
	o.HTTPStatus = rec.status
	if err != nil {
		var apiErr *openai.APIError
		var reqErr *openai.RequestError
		switch {
		case errors.As(err, &apiErr):
			o.HTTPStatus, o.Err, o.ErrKind = apiErr.HTTPStatusCode, apiErr.Message, evidence.HTTPError
		case errors.As(err, &reqErr):
			o.HTTPStatus, o.Err, o.ErrKind = reqErr.HTTPStatusCode, errorBody(reqErr.Body), evidence.HTTPError
		default:
			o.Err, o.ErrKind = err.Error(), errKind(ctx, err)
			if rec.status == http.StatusOK {
				o.ErrKind = evidence.Decode
			}
		}
		return o
	}
	if len(resp.Choices) == 0 {
		o.Err, o.ErrKind = "the reply has no choices", evidence.Decode
		return o
	}
	o.Text = resp.Choices[0].Message.Content
	o.FinishReason = string(resp.Choices[0].FinishReason)
	raw := parseRaw(rec.body)
	o.Tokens = raw.tokens
	o.Reasoning = raw.reasoning
	if p.Logprobs || p.TopLogprobs > 0 {
		o.Logprobs = raw.logprobs
		if o.Logprobs == nil {
			o.Logprobs = &evidence.Logprobs{}
		}
		// Literals SanitizeJSON turned into null are non-finite, not null.
		n := min(rec.nonFinite, o.Logprobs.Null)
		o.Logprobs.Null -= n
		o.Logprobs.NonFinite += n
	}
	o.Cap()
	return o
}

// errKind names a transport failure. A deadline is a timeout; a cancelled
// parent means bmx stopped asking (the server died or the user interrupted).
func errKind(ctx context.Context, err error) evidence.ErrorKind {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return evidence.Timeout
	case errors.Is(err, context.Canceled):
		return evidence.Aborted
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		return evidence.Harness // bmx's socket, not the server's answer
	}
	return evidence.Connection
}

// errorBody extracts the message of an error body in either shape (SGLang's
// flat {"message"}, vLLM's nested {"error":{"message"}}) or returns the text.
func errorBody(body []byte) string {
	var flat struct {
		Message string `json:"message"`
		Detail  any    `json:"detail"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &flat) == nil {
		switch {
		case flat.Error != nil && flat.Error.Message != "":
			return flat.Error.Message
		case flat.Message != "":
			return flat.Message
		case flat.Detail != nil:
			return fmt.Sprint(flat.Detail)
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

// MaxReply is the most bmx reads of one chat reply (its body, in bytes); a
// longer one is an error that says so.
const MaxReply = 16 << 20

// recorder is go-openai's HTTP client: it keeps the raw response body, for
// the fields go-openai does not decode (vLLM's reasoning, null logprobs), and
// rewrites bare NaN/Infinity literals to null so one non-finite logprob does
// not make the whole reply undecodable.
type recorder struct {
	doer      openai.HTTPDoer
	mu        sync.Mutex
	status    int
	body      []byte
	nonFinite int
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.doer.Do(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > MaxReply {
		// Cut JSON would read as a garbled reply: say which limit it hit.
		r.mu.Lock()
		r.status = resp.StatusCode
		r.mu.Unlock()
		return nil, fmt.Errorf("the reply is over %d MiB, the most bmx reads of one reply: it was not judged", MaxReply>>20)
	}
	clean, n := SanitizeJSON(body)
	r.mu.Lock()
	r.status, r.body, r.nonFinite = resp.StatusCode, clean, n
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(clean))
	resp.ContentLength = int64(len(clean))
	return resp, nil
}

// SanitizeJSON replaces the non-standard literals NaN, Infinity and
// -Infinity outside strings with null and counts them; so too a logprob
// written as a string ("logprob": "NaN"), which would make the reply
// undecodable rather than NaN evidence.
func SanitizeJSON(b []byte) ([]byte, int) {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) &&
		!bytes.Contains(b, []byte(`nan"`)) && !bytes.Contains(b, []byte(`inf"`)) {
		return b, 0
	}
	res := make([]byte, 0, len(b))
	n := 0
	inStr, strAt := false, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			res = append(res, c)
			if c == '\\' && i+1 < len(b) {
				i++
				res = append(res, b[i])
			} else if c == '"' {
				inStr = false
				if nonFiniteLogprob(res[:strAt], res[strAt:]) {
					res = append(res[:strAt], "null"...)
					n++
				}
			}
			continue
		}
		if c == '"' {
			inStr, strAt = true, len(res)
			res = append(res, c)
			continue
		}
		lit := nonFiniteLiteral(b[i:])
		if lit == 0 {
			res = append(res, c)
			continue
		}
		res = append(res, "null"...)
		i += lit - 1
		n++
	}
	return res, n
}

// nonFiniteLogprob reports a JSON string that spells a non-finite number
// ("NaN", "-Infinity", "inf") as the value of a "logprob" key.
func nonFiniteLogprob(before, str []byte) bool {
	if len(str) > 12 {
		return false
	}
	switch strings.ToLower(strings.Trim(string(str), `"`)) {
	case "nan", "-nan", "infinity", "-infinity", "inf", "-inf":
		before = bytes.TrimRight(before, " \t\r\n")
		if !bytes.HasSuffix(before, []byte(":")) {
			return false
		}
		return bytes.HasSuffix(bytes.TrimRight(before[:len(before)-1], " \t\r\n"), []byte(`"logprob"`))
	}
	return false
}

// nonFiniteLiteral returns the length of the NaN/Infinity literal b starts
// with, or 0.
func nonFiniteLiteral(b []byte) int {
	for _, lit := range []string{"-Infinity", "Infinity", "NaN"} {
		if bytes.HasPrefix(b, []byte(lit)) {
			return len(lit)
		}
	}
	return 0
}

// minLogprob is where a candidate's logprob is clamped: -inf (a masked
// token) cannot be written to JSON; vLLM clamps to the same value.
const minLogprob = -9999.0

// countLogprob counts a null or non-finite logprob into lp and reports
// whether v is a number.
func countLogprob(lp *evidence.Logprobs, v *float64) bool {
	switch {
	case v == nil:
		lp.Null++
	case math.IsNaN(*v) || math.IsInf(*v, 0):
		lp.NonFinite++
	default:
		return true
	}
	return false
}

type rawReply struct {
	reasoning string
	logprobs  *evidence.Logprobs
	// tokens is usage.completion_tokens, nil when the reply has no usage.
	tokens *int
}

// parseRaw reads what go-openai's structs lose: vLLM's "reasoning" field
// (SGLang and older vLLM use "reasoning_content") and logprobs that are null.
func parseRaw(body []byte) rawReply {
	var reply struct {
		Choices []struct {
			Message struct {
				ReasoningContent *string `json:"reasoning_content"`
				Reasoning        *string `json:"reasoning"`
			} `json:"message"`
			Logprobs *struct {
				Content []struct {
					Token       string   `json:"token"`
					Logprob     *float64 `json:"logprob"`
					TopLogprobs []struct {
						Token   string   `json:"token"`
						Logprob *float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens *int `json:"completion_tokens"`
		} `json:"usage"`
	}
	var out rawReply
	if json.Unmarshal(body, &reply) != nil || len(reply.Choices) == 0 {
		return out
	}
	if reply.Usage != nil {
		out.tokens = reply.Usage.CompletionTokens
	}
	ch := reply.Choices[0]
	switch {
	case ch.Message.ReasoningContent != nil && *ch.Message.ReasoningContent != "":
		out.reasoning = *ch.Message.ReasoningContent
	case ch.Message.Reasoning != nil:
		out.reasoning = *ch.Message.Reasoning
	}
	if ch.Logprobs != nil {
		lp := &evidence.Logprobs{Min: math.Inf(1)}
		withTop := false
		for _, t := range ch.Logprobs.Content {
			lp.Tokens++
			// Every generated token gets a step, so a step's index is its
			// position in the answer; a null or non-finite logprob is left
			// at 0 with no candidates (that reply is NaN evidence anyway).
			// A candidate's null or non-finite logprob is NaN evidence too:
			// the numbers are broken even where the chosen token's is not.
			st := evidence.Step{Token: t.Token}
			finite := countLogprob(lp, t.Logprob)
			if finite {
				st.Logprob = *t.Logprob
				lp.Min = min(lp.Min, *t.Logprob)
			}
			for _, a := range t.TopLogprobs {
				if countLogprob(lp, a.Logprob) && finite {
					st.Top = append(st.Top, evidence.Alt{Token: a.Token, Logprob: max(*a.Logprob, minLogprob)})
				}
			}
			withTop = withTop || len(st.Top) > 0
			lp.Steps = append(lp.Steps, st)
		}
		if !withTop {
			lp.Steps = nil // no top_logprobs: nothing to compare
		}
		if math.IsInf(lp.Min, 1) {
			lp.Min = 0
		}
		out.logprobs = lp
	}
	return out
}
