// Package probe owns what bmx asks a server and what it records of the
// answers: the built-in probe sets, probe files, the OpenAI-compatible client
// calls, producing evidence.Observations (text, reasoning, finish reason, logprob
// health, HTTP status and errors, timings).
//
// It never decides a verdict: an Observation carries the probe's expectation
// along with what came back, so the classifier can judge it, now or later
// from results.jsonl.
package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role" toml:"role"`
	Content string `json:"content" toml:"content"`
}

// Request is one chat request of a probe.
type Request struct {
	Messages []Message
	Expect   *evidence.Expect
}

// Probe is one question put to the server. A chat probe sends its Requests
// concurrently (a batch of one for most probes).
type Probe struct {
	Name      string
	Kind      evidence.ProbeKind
	Requests  []Request
	Thinking  bool
	MaxTokens int
	Logprobs  bool
	// TopLogprobs is how many candidates per generated token to ask for
	// (top_logprobs; 0 = none). Greedy probes that ask for logprobs ask for
	// DefaultTopLogprobs, so classify can compare their distributions with
	// the reference cell's.
	TopLogprobs int
	// Temperature, when set, samples instead of decoding greedily; such a
	// probe is judged by the shape of its text only.
	Temperature *float32
}

// DefaultTopLogprobs is the top_logprobs a greedy probe with logprobs asks
// for. Five candidates per token hold nearly all of the probability mass at
// a greedy step of a healthy model (the chosen token usually has most of
// it), which is what the divergence estimate needs; more would multiply the
// reply's size (k+1 entries per token, recorded in results.jsonl) for mass
// that is mostly in the tail. Every server accepts 5: OpenAI caps
// top_logprobs at 20, vLLM's --max-logprobs defaults to 20, and SGLang and
// llama-server take any small number.
const DefaultTopLogprobs = 5

// MaxTopLogprobs is the most a probe file may ask for (OpenAI's limit).
const MaxTopLogprobs = 20

// Greedy turns on logprobs with the default top-k candidates: a greedy
// probe whose numerics classify compares with the reference cell's.
func (p Probe) Greedy() Probe {
	p.Logprobs, p.TopLogprobs = true, DefaultTopLogprobs
	return p
}

// Chat builds a chat probe of one user prompt, sent concurrency times at once.
func Chat(name, prompt string, expect *evidence.Expect, maxTokens, concurrency int) Probe {
	p := Probe{Name: name, Kind: evidence.Chat, MaxTokens: maxTokens}
	for range max(concurrency, 1) {
		p.Requests = append(p.Requests, Request{Messages: []Message{{Role: "user", Content: prompt}}, Expect: expect})
	}
	return p
}

// Set is a named list of probes, and how the performance probe runs after
// them.
type Set struct {
	Name   string
	Probes []Probe
	// Perf configures Client.Perf, which the launcher runs on cells whose
	// verdict is correct or degraded; the zero value is off.
	Perf PerfConfig
}

// Smoke is the built-in smoke set: the four probes of the story that started
// bmx (model info, "Say 'OK'", 300+23 plainly and in thinking mode), a
// concurrent batch of mixed prompt lengths (some FP4 NaN bugs appear only in
// heterogeneous batches), a longer generation, and one sampled answer.
//
// The short greedy text probes (say-ok, math, count) ask for logprobs with
// the top-5 candidates per token, so a cell's numerics can be compared with
// the reference cell's. The thinking probe does not: its up to 2048 tokens
// of reasoning would make each cell's record large for little more
// evidence; the concurrent batch and the sampled probe do not either (the
// batch looks for NaN under load, and a sampled answer has no greedy prefix
// to compare).
func Smoke() Set {
	sayOK := Chat("say-ok", "Say 'OK'", &evidence.Expect{Contains: "OK"}, 32, 1).Greedy()
	math := Chat("math", "What is 300+23?", evidence.Number(323), 64, 1).Greedy()
	thinking := Chat("math-thinking", "What is 300+23?", evidence.Number(323), 2048, 1)
	thinking.Thinking = true
	count := Chat("count", "Count from 1 to 50, separated by commas. Output only the numbers.",
		&evidence.Expect{Count: 50}, 512, 1).Greedy()
	// Some backend bugs show only when sampling (a real SGLang one produced
	// garbage at temperature 1.0 alone).
	// The topic is its positive evidence: sampled text has no single right
	// answer, but two sentences about the sea name it.
	sampled := Chat("sampled", "Write two sentences about the sea.", &evidence.Expect{Regex: `(?i)\b(?:sea|seas|ocean|oceans|waves?|water|tides?|shore)\b`}, 96, 1)
	t := float32(0.8)
	sampled.Temperature = &t
	return Set{Name: "smoke", Probes: []Probe{
		{Name: "model-info", Kind: evidence.ModelInfo},
		sayOK, math, thinking, MixedBatch(16), count, sampled,
	}, Perf: DefaultPerf()}
}

// MixedBatch is n concurrent additions whose prompts differ in length, from a
// bare question to one behind several hundred words of context.
func MixedBatch(n int) Probe {
	p := Probe{Name: "batch-mixed", Kind: evidence.Chat, MaxTokens: 64}
	const filler = "The following note is background material and can be ignored. "
	for i := range n {
		a, b := 12+7*i, 31+3*i
		prompt := strings.Repeat(filler, (i*5)%37) + fmt.Sprintf("What is %d+%d? Answer with the number only.", a, b)
		p.Requests = append(p.Requests, Request{
			Messages: []Message{{Role: "user", Content: prompt}},
			Expect:   evidence.Number(float64(a + b)),
		})
	}
	return p
}

// Builtin returns the built-in set called name.
func Builtin(name string) (Set, error) {
	switch name {
	case "smoke":
		return Smoke(), nil
	}
	return Set{}, fmt.Errorf("unknown probe set %q (built-in sets: smoke)", name)
}

type rawFile struct {
	Probe []rawProbe `toml:"probe"`
	Perf  *rawPerf   `toml:"perf"`
}

type rawProbe struct {
	Name        string             `toml:"name"`
	Kind        evidence.ProbeKind `toml:"kind"`
	Prompt      string             `toml:"prompt"`
	Messages    []Message          `toml:"messages"`
	Thinking    bool               `toml:"thinking"`
	MaxTokens   int                `toml:"max_tokens"`
	Concurrency int                `toml:"concurrency"`
	Logprobs    bool               `toml:"logprobs"`
	TopLogprobs *int               `toml:"top_logprobs"`
	Expect      *evidence.Expect   `toml:"expect"`
	Temperature *float32           `toml:"temperature"`
}

// LoadFile reads a probe set from a TOML file of [[probe]] tables and an
// optional [perf] table (prompt_tokens, output_tokens, concurrency,
// requests, ignore_eos, noise_floor_pct; enabled = false turns the performance probe off;
// what it leaves out is DefaultPerf's). Every problem names the file and
// the probe.
func LoadFile(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Set{}, fmt.Errorf("read probe file: %w", err)
	}
	var raw rawFile
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		return Set{}, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	bad := func(i int, name, key, format string, args ...any) {
		errs = append(errs, probeError(path, data, i, name, key, fmt.Sprintf(format, args...)))
	}
	for _, k := range md.Undecoded() {
		errs = append(errs, &matrix.ConfigError{File: path, Line: matrix.KeyLine(data, k...), Msg: "unknown key " + k.String()})
	}
	set := Set{Name: path}
	perf, perfErrs := raw.Perf.perfConfig()
	for _, e := range perfErrs {
		errs = append(errs, perfError(path, data, e))
	}
	set.Perf = perf
	seen := map[string]bool{}
	for i, rp := range raw.Probe {
		if rp.Name == "" {
			bad(i, "", "name", "name is required")
		} else if seen[rp.Name] {
			bad(i, rp.Name, "name", "the name is used twice")
		}
		seen[rp.Name] = true
		set.Probes = append(set.Probes, rp.probe(func(key, format string, args ...any) {
			bad(i, rp.Name, key, format, args...)
		}))
	}
	if len(raw.Probe) == 0 {
		errs = append(errs, fmt.Errorf("%s: no [[probe]] defined", path))
	}
	if err := errors.Join(errs...); err != nil {
		return Set{}, err
	}
	return set, nil
}

// probe is the Probe that rp describes, defaulted; bad is told each problem
// by the key it is under.
func (rp rawProbe) probe(bad func(key, format string, args ...any)) Probe {
	p := Probe{Name: rp.Name, Kind: rp.Kind, Thinking: rp.Thinking, MaxTokens: rp.MaxTokens, Logprobs: rp.Logprobs, Temperature: rp.Temperature}
	if t := rp.Temperature; t != nil && (*t < 0 || *t > 2) {
		bad("temperature", "temperature %g: want 0 to 2", *t)
	}
	// top_logprobs = k asks for logprobs with k candidates; logprobs =
	// true alone on a greedy probe asks for the default k, so its
	// numerics can be compared with the reference cell's;
	// top_logprobs = 0 asks for the chosen tokens' logprobs only.
	switch k := rp.TopLogprobs; {
	case k != nil && (*k < 0 || *k > MaxTopLogprobs):
		bad("top_logprobs", "top_logprobs %d: want 0 to %d", *k, MaxTopLogprobs)
	case k != nil:
		p.TopLogprobs = *k
		p.Logprobs = p.Logprobs || *k > 0
	case p.Logprobs && (p.Temperature == nil || *p.Temperature == 0):
		p.TopLogprobs = DefaultTopLogprobs
	}
	switch rp.Kind {
	case evidence.ModelInfo:
		return p
	case "", evidence.Chat:
		p.Kind = evidence.Chat
	default:
		bad("kind", "unknown kind %q (chat or model-info)", rp.Kind)
	}
	msgs := rp.Messages
	switch {
	case rp.Prompt != "" && len(msgs) > 0:
		bad("messages", "prompt and messages are exclusive")
	case rp.Prompt != "":
		msgs = []Message{{Role: "user", Content: rp.Prompt}}
	case len(msgs) == 0:
		bad("", "needs a prompt or messages")
	}
	if err := checkExpect(rp.Expect); err != nil {
		bad("expect", "%v", err)
	}
	if p.MaxTokens < 0 || rp.Concurrency < 0 {
		bad("max_tokens", "max_tokens and concurrency must not be negative")
	}
	if p.MaxTokens == 0 {
		p.MaxTokens = 256
	}
	for range max(rp.Concurrency, 1) {
		p.Requests = append(p.Requests, Request{Messages: msgs, Expect: rp.Expect})
	}
	return p
}

// probeError is a problem of the i-th probe, located by the line of its key
// (or of its [[probe]] header when key is "" or not in the text).
func probeError(path string, data []byte, i int, name, key, msg string) error {
	at := fmt.Sprintf("probe #%d", i+1)
	if name != "" {
		at += fmt.Sprintf(" %q", name)
	}
	if key != "" {
		at += "." + key
	}
	return &matrix.ConfigError{File: path, Line: matrix.KeyLine(data, "probe", "["+strconv.Itoa(i)+"]", key), Key: at, Msg: msg}
}

// perfError locates a [perf] problem ("perf.<key> ...") by its key's line.
func perfError(path string, data []byte, msg string) error {
	key, _, _ := strings.Cut(msg, " ")
	return &matrix.ConfigError{File: path, Line: matrix.KeyLine(data, strings.Split(key, ".")...), Msg: msg}
}

func checkExpect(e *evidence.Expect) error {
	if e == nil {
		return nil
	}
	n := 0
	if e.Number != nil {
		n++
	}
	if e.Count < 0 {
		return errors.New("expect.count must be positive")
	}
	if e.Count > 0 {
		n++
	}
	for _, s := range []string{e.Contains, e.Regex, e.Exact} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New("expect needs exactly one of number, contains, regex, exact, count")
	}
	if e.Regex != "" {
		if _, err := regexp.Compile(e.Regex); err != nil {
			return fmt.Errorf("expect.regex: %w", err)
		}
	}
	return nil
}
