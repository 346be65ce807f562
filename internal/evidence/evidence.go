// Package evidence holds what bmx observed of a server and what it expected:
// one Observation per probe request (text, reasoning, finish reason, token
// counts, logprob health and the top-k logprobs of greedy answers, HTTP
// status, a typed error kind, timings) and the Expect that a right answer
// meets.
//
// It is the leaf every other package reads: the probe client produces
// observations, classify judges them, reports stores and renders them. It
// imports nothing of bmx and does no I/O.
package evidence

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ProbeKind says what a probe asks.
type ProbeKind string

// Kinds of probe.
const (
	Chat      ProbeKind = "chat"
	ModelInfo ProbeKind = "model-info"
)

// ErrorKind says why a request got no answer to judge; empty when it got one.
type ErrorKind string

// Error kinds of an Observation.
const (
	HTTPError  ErrorKind = "http"       // the server answered with an error status
	Timeout    ErrorKind = "timeout"    // no answer within the probe timeout
	Connection ErrorKind = "connection" // refused, reset, EOF
	Decode     ErrorKind = "decode"     // 200 but the body is not a chat completion
	Aborted    ErrorKind = "aborted"    // not sent: the server was already gone
	// Harness is bmx's own failure, not the server's: bmx had no file
	// descriptor left for the request's socket (a low ulimit -n).
	Harness ErrorKind = "harness"
)

// Expect is what a right answer looks like; at most one field is set. A nil
// Expect means the probe is judged by the text's shape alone (and, in a sweep
// with a reference cell, by agreeing with the reference's answer).
type Expect struct {
	Number   *float64 `json:"number,omitempty" toml:"number"`
	Contains string   `json:"contains,omitempty" toml:"contains"`
	Regex    string   `json:"regex,omitempty" toml:"regex"`
	Exact    string   `json:"exact,omitempty" toml:"exact"`
	// Count is the answer to "count from 1 to Count": those numbers in
	// order and nothing between them but separators.
	Count int `json:"count,omitempty" toml:"count"`
}

func (e *Expect) String() string {
	switch {
	case e == nil:
		return "a well-formed answer"
	case e.Number != nil:
		return "the number " + strconv.FormatFloat(*e.Number, 'f', -1, 64)
	case e.Contains != "":
		return fmt.Sprintf("text containing %q", e.Contains)
	case e.Regex != "":
		return fmt.Sprintf("text matching /%s/", e.Regex)
	case e.Count > 0:
		return fmt.Sprintf("the numbers 1 to %d and nothing else", e.Count)
	default:
		return fmt.Sprintf("exactly %q", e.Exact)
	}
}

// Number is a helper for Expect{Number: ...}.
func Number(n float64) *Expect { return &Expect{Number: &n} }

// Logprobs summarises the token logprobs of one answer. JSON has no NaN, so
// a non-finite logprob reaches the client as null (pydantic, orjson) or as a
// bare NaN/Infinity literal (Python's json); both are counted from the raw
// body, because go-openai decodes null as 0.
type Logprobs struct {
	Tokens    int     `json:"tokens"`
	Null      int     `json:"null,omitempty"`
	NonFinite int     `json:"non_finite,omitempty"`
	Min       float64 `json:"min"`
	// Steps are the sampled tokens with their top-k alternatives, in order,
	// when the probe asked for top_logprobs; classify compares them with the
	// reference cell's.
	Steps []Step `json:"steps,omitempty"`
}

// Bad reports whether any logprob was null or non-finite.
func (l *Logprobs) Bad() bool { return l != nil && (l.Null > 0 || l.NonFinite > 0) }

// Step is one generated token: its text, its logprob, and the top-k
// candidates the server reported at that position (the chosen one among them).
type Step struct {
	Token   string  `json:"t"`
	Logprob float64 `json:"lp"`
	Top     []Alt   `json:"top,omitempty"`
}

// Alt is one candidate token of a Step.
type Alt struct {
	Token   string  `json:"t"`
	Logprob float64 `json:"lp"`
}

// Observation is the raw outcome of one request. Its JSON names match the
// case format of the evidence corpus, so recorded runs and corpus cases are
// judged by the same code.
type Observation struct {
	Probe    string    `json:"name"`
	Kind     ProbeKind `json:"kind,omitempty"`
	Request  int       `json:"request,omitempty"` // index within a batch
	Prompt   string    `json:"prompt"`
	Expect   *Expect   `json:"expect"`
	Thinking bool      `json:"thinking,omitempty"`
	// Temperature is set for a sampled probe (nil: greedy).
	Temperature  *float32  `json:"temperature,omitempty"`
	MaxTokens    int       `json:"max_tokens,omitempty"`
	Text         string    `json:"text"`
	Reasoning    string    `json:"reasoning"`
	FinishReason string    `json:"finish_reason,omitempty"`
	HTTPStatus   int       `json:"http_status"`
	Err          string    `json:"error"`
	ErrKind      ErrorKind `json:"error_kind,omitempty"`
	Logprobs     *Logprobs `json:"logprobs,omitempty"`
	// Tokens are the completion tokens as the server counts them; nil when
	// the server did not say (a recorded case), 0 when it said none.
	Tokens    *int   `json:"tokens,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	LatencyMS int64  `json:"latency_ms,omitempty"`
	// TextBytes and ReasoningBytes are the full sizes of a text or
	// reasoning that Cap cut (0: kept whole).
	TextBytes      int `json:"text_bytes,omitempty"`
	ReasoningBytes int `json:"reasoning_bytes,omitempty"`
	// Forced is how this cell's server scored the reference cell's greedy
	// answer to the same request, token by token; nil when it was not
	// asked (no reference yet, not a greedy probe, a server that cannot).
	Forced *Forced `json:"forced,omitempty"`
}

// Forced is a teacher-forced scoring: the cell's server was given the
// reference cell's answer (the yardstick's own tokens) after the same
// prompt and asked for its logprobs of each of those tokens, with its own
// top-k at each position. Every position is then conditioned on the same
// text on both sides, so the cell's distributions can be compared with the
// reference's over the whole answer, not only up to where two greedy
// paths part at a tie.
type Forced struct {
	// Against is the cell whose answer was forced: the reference.
	Against string `json:"against"`
	// Method is how the server was asked (the request shape, e.g.
	// "sglang-generate", "vllm-chat-prompt-logprobs").
	Method string `json:"method,omitempty"`
	// Steps are one per token of the reference's answer, in order: Token
	// is the reference's token, Logprob this cell's logprob of it, Top this
	// cell's top-k candidates at that position.
	Steps []Step `json:"steps,omitempty"`
	// Err says why the server could not score the answer; the cell's
	// verdict does not depend on it.
	Err string `json:"error,omitempty"`
}

// What an observation keeps of a long reply: its head and its tail (a
// collapse shows at the end), and the first MaxSteps logprob positions (the
// numerics compare a greedy prefix). A server that answers 10 MB then costs
// results.jsonl and every report tens of KiB.
const (
	KeepHead = 24 << 10
	KeepTail = 8 << 10
	MaxSteps = 1024
)

// Cap cuts the text, reasoning and error message to KeepHead+KeepTail bytes
// each (on rune boundaries, with a marker that gives the size cut), and the
// logprob steps (generated and forced) to MaxSteps, recording the full sizes.
func (o *Observation) Cap() {
	if t, n := capText(o.Text); n > 0 {
		o.Text, o.TextBytes = t, n
	}
	if t, n := capText(o.Reasoning); n > 0 {
		o.Reasoning, o.ReasoningBytes = t, n
	}
	o.Err, _ = capText(o.Err)
	if o.Logprobs != nil && len(o.Logprobs.Steps) > MaxSteps {
		o.Logprobs.Steps = o.Logprobs.Steps[:MaxSteps:MaxSteps]
	}
	if f := o.Forced; f != nil {
		f.Err, _ = capText(f.Err)
		if len(f.Steps) > MaxSteps {
			f.Steps = f.Steps[:MaxSteps:MaxSteps]
		}
	}
}

// capText returns s cut to its head and tail, and its full length; or s and
// 0 when it is short enough.
func capText(s string) (string, int) {
	if len(s) <= KeepHead+KeepTail {
		return s, 0
	}
	head, tail := KeepHead, len(s)-KeepTail
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + fmt.Sprintf(" … [bmx cut %d bytes] … ", tail-head) + s[tail:], len(s)
}

// Answered reports whether the request got an answer to judge.
func (o *Observation) Answered() bool { return o.ErrKind == "" }

// UnmarshalJSON reads an observation as results.jsonl stores it, and also
// as recorded cases from elsewhere write the token count: a top-level
// "completion_tokens" or the API's own "usage": {"completion_tokens": N}.
func (o *Observation) UnmarshalJSON(b []byte) error {
	var aux ObservationJSON
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*o = aux.Observation()
	return nil
}

// plainObservation is an Observation without its UnmarshalJSON.
type plainObservation Observation

// ObservationJSON is an observation as JSON holds it (UnmarshalJSON's
// reading). What decodes many at once (a run's results.jsonl) decodes into
// it and calls Observation: encoding/json hands a type with its own
// UnmarshalJSON the bytes it has already scanned, to be scanned twice more.
type ObservationJSON struct {
	plainObservation
	CompletionTokens *int `json:"completion_tokens"`
	Usage            *struct {
		CompletionTokens *int `json:"completion_tokens"`
	} `json:"usage"`
}

// Observation is the observation read, its token count from wherever the
// JSON gave it.
func (w *ObservationJSON) Observation() Observation {
	o := Observation(w.plainObservation)
	if o.Tokens == nil {
		o.Tokens = w.CompletionTokens
	}
	if o.Tokens == nil && w.Usage != nil {
		o.Tokens = w.Usage.CompletionTokens
	}
	return o
}
