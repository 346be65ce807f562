package evidence

import (
	"encoding/json"
	"math"
	"slices"
	"time"
)

// Perf is what the performance probe measured of one cell: streaming chat
// completions of a fixed prompt and output length, at concurrency 1 and at
// a higher concurrency, after one warm-up request that is not counted.
//
// Token counts are the server's own (usage.completion_tokens of the
// stream's last chunk), never the number of chunks: a chunk may carry
// several tokens, or none.
type Perf struct {
	// PromptTokens and OutputTokens are what was asked: the prompt's length
	// in tokens (approximate: bmx builds it from words and scales it once
	// by the warm-up's usage.prompt_tokens) and max_tokens.
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
	// PromptTokensSeen is the median usage.prompt_tokens the server
	// reported for the counted requests (0: it did not say).
	PromptTokensSeen int `json:"prompt_tokens_seen,omitempty"`
	// IgnoreEOS says whether requests carried ignore_eos (false when the
	// server refused it).
	IgnoreEOS bool `json:"ignore_eos"`
	// NoiseFloorPct is the probe's between-start noise floor (the [perf]
	// table's noise_floor_pct): how far apart, in percent, two cells'
	// rates must be before one is called faster, on top of their spreads
	// not overlapping. nil in runs from before the setting:
	// DefaultNoiseFloorPct applies.
	NoiseFloorPct *float64    `json:"noise_floor_pct,omitempty"`
	Warmup        PerfRequest `json:"warmup"`
	Levels        []PerfLevel `json:"levels"`
	// Problems say what makes the figures doubtful or missing: failed
	// requests, fewer tokens than asked, no usage in the stream.
	Problems []string `json:"problems,omitempty"`
}

// PerfRequest is one timed streaming request. Times are microseconds from
// sending the request.
type PerfRequest struct {
	// TTFTUS is the time to the first chunk with text (answer or
	// reasoning).
	TTFTUS int64 `json:"ttft_us"`
	// ITLUS are the gaps between consecutive chunks with text, the first
	// KeepGaps of them: a stream that goes on for minutes costs no more.
	ITLUS []int64 `json:"itl_us,omitempty"`
	// ITL summarises every gap, those past KeepGaps included (nil: no
	// gaps, or a run from before it was recorded).
	ITL *Gaps `json:"itl,omitempty"`
	// E2EUS is the time to the end of the stream.
	E2EUS int64 `json:"e2e_us"`
	// OutputTokens is usage.completion_tokens (0 when Usage is false).
	OutputTokens int `json:"output_tokens"`
	PromptTokens int `json:"prompt_tokens,omitempty"`
	// Usage says whether the stream reported usage.
	Usage        bool      `json:"usage"`
	Chunks       int       `json:"chunks"`
	FinishReason string    `json:"finish_reason,omitempty"`
	HTTPStatus   int       `json:"http_status,omitempty"`
	Err          string    `json:"error,omitempty"`
	ErrKind      ErrorKind `json:"error_kind,omitempty"`
}

// DefaultNoiseFloorPct is the between-start noise floor where a probe
// file sets none: on the simulated host two starts of one cell differ by
// 0.7-0.8%, so 5% keeps a restart from changing which cell is fastest;
// a busy CPU host needs more (the llama.cpp example sets its own).
const DefaultNoiseFloorPct = 5.0

// OK reports whether the request was answered with a complete stream.
func (r *PerfRequest) OK() bool { return r.ErrKind == "" }

// TokensPerSecond is the request's output tokens over its end-to-end time:
// the rate one user sees, time to first token included.
func (r *PerfRequest) TokensPerSecond() float64 {
	if r.E2EUS <= 0 || !r.Usage {
		return 0
	}
	return float64(r.OutputTokens) / (float64(r.E2EUS) / 1e6)
}

// TPOTMS is the request's time per output token after the first, in
// milliseconds: (end-to-end time - TTFT) / (tokens - 1), vLLM's TPOT. It
// does not depend on how the server groups tokens into chunks, where the
// gaps between chunks do (two chunks read together make a zero gap and a
// double one). ok is false without the server's token count, or with fewer
// than two tokens.
func (r *PerfRequest) TPOTMS() (ms float64, ok bool) {
	if !r.Usage || r.OutputTokens < 2 || r.E2EUS <= r.TTFTUS {
		return 0, false
	}
	return float64(r.E2EUS-r.TTFTUS) / 1000 / float64(r.OutputTokens-1), true
}

// DecodeTokensPerSecond is the request's decode rate: the tokens after the
// first over the time after the first, TTFT left out (1000 / TPOTMS).
func (r *PerfRequest) DecodeTokensPerSecond() (tps float64, ok bool) {
	ms, ok := r.TPOTMS()
	if !ok {
		return 0, false
	}
	return 1000 / ms, true
}

// PerfLevel is a cell's figures at one concurrency: Requests counted
// requests, Concurrency of them in flight at a time.
type PerfLevel struct {
	Concurrency int `json:"concurrency"`
	// Requests counts the answered requests the figures are made of;
	// Failed those that got no complete answer; Short those answered with
	// fewer tokens than asked (by the server's count).
	Requests int `json:"requests"`
	Failed   int `json:"failed,omitempty"`
	Short    int `json:"short,omitempty"`
	// TTFTMS is the time to first token over the requests.
	TTFTMS Spread `json:"ttft_ms"`
	// TPOTMS is the time per output token after the first over the
	// requests, and DecodeTokensPerSecond its inverse per request: the
	// decode rate, TTFT left out (see PerfRequest.TPOTMS).
	TPOTMS                Spread `json:"tpot_ms"`
	DecodeTokensPerSecond Spread `json:"decode_tokens_per_s"`
	// TokensPerSecond is the output rate per request, time to first token
	// included: output tokens over end-to-end time. Runs written before
	// it was named so call it tokens_per_s (UnmarshalJSON reads both).
	TokensPerSecond Spread `json:"tokens_per_s_incl_ttft"`
	// TotalTokensPerSecond is every request's output tokens over the
	// level's wall time: the server's throughput at this concurrency.
	TotalTokensPerSecond float64       `json:"total_tokens_per_s"`
	WallMS               float64       `json:"wall_ms"`
	Runs                 []PerfRequest `json:"runs"`
}

// Spread is one figure over the requests of a level: its median, 10th and
// 90th percentiles, minimum and maximum.
type Spread struct {
	Min    float64 `json:"min"`
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// SpreadOf summarises values (any order); the zero Spread for none.
func SpreadOf(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	return Spread{Min: round3(v[0]), P10: round3(Percentile(v, 10)), Median: round3(Percentile(v, 50)),
		P90: round3(Percentile(v, 90)), Max: round3(v[len(v)-1])}
}

// Overlaps reports whether two spreads' min-max ranges overlap: their
// difference is within the noise of the repeated requests.
func (s Spread) Overlaps(o Spread) bool { return s.Min <= o.Max && o.Min <= s.Max }

// Percentile is the p-th percentile of sorted values, interpolated
// linearly between the nearest ranks (NumPy's default); NaN for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// round3 keeps three decimals (a microsecond of a millisecond figure), so
// results.jsonl and reports stay readable.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// SummarizeLevel computes a level's figures from its requests; asked is
// the output length each request asked for, wall the time from the first
// request sent to the last stream ended.
func SummarizeLevel(concurrency, asked int, runs []PerfRequest, wall time.Duration) PerfLevel {
	l := PerfLevel{Concurrency: concurrency, WallMS: round3(float64(wall.Microseconds()) / 1000), Runs: runs}
	var ttft, tpot, decode, tps []float64
	total := 0
	for _, r := range runs {
		if !r.OK() {
			l.Failed++
			continue
		}
		l.Requests++
		if r.Usage && r.OutputTokens < asked {
			l.Short++
		}
		total += r.OutputTokens
		ttft = append(ttft, float64(r.TTFTUS)/1000)
		if ms, ok := r.TPOTMS(); ok {
			tpot = append(tpot, ms)
			decode = append(decode, 1000/ms)
		}
		tps = append(tps, r.TokensPerSecond())
	}
	l.TTFTMS, l.TokensPerSecond = SpreadOf(ttft), SpreadOf(tps)
	l.TPOTMS, l.DecodeTokensPerSecond = SpreadOf(tpot), SpreadOf(decode)
	if wall > 0 {
		l.TotalTokensPerSecond = round3(float64(total) / wall.Seconds())
	}
	return l
}

// UnmarshalJSON reads a level as written now or before TPOT was recorded:
// tokens_per_s is the old name of tokens_per_s_incl_ttft, and a level
// without tpot_ms has its TPOT and decode rate computed from its requests.
func (l *PerfLevel) UnmarshalJSON(data []byte) error {
	type plain PerfLevel
	var v struct {
		plain
		Legacy *Spread `json:"tokens_per_s"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*l = PerfLevel(v.plain)
	if v.Legacy != nil && l.TokensPerSecond == (Spread{}) {
		l.TokensPerSecond = *v.Legacy
	}
	if l.TPOTMS == (Spread{}) {
		var tpot, decode []float64
		for _, r := range l.Runs {
			if ms, ok := r.TPOTMS(); ok && r.OK() {
				tpot, decode = append(tpot, ms), append(decode, 1000/ms)
			}
		}
		l.TPOTMS, l.DecodeTokensPerSecond = SpreadOf(tpot), SpreadOf(decode)
	}
	return nil
}

// Level returns the figures at a concurrency, or nil.
func (p *Perf) Level(concurrency int) *PerfLevel {
	if p == nil {
		return nil
	}
	for i := range p.Levels {
		if p.Levels[i].Concurrency == concurrency {
			return &p.Levels[i]
		}
	}
	return nil
}

// Top returns the level of highest concurrency that has answered requests,
// or nil: the figures cells are ranked by.
func (p *Perf) Top() *PerfLevel {
	if p == nil {
		return nil
	}
	var top *PerfLevel
	for i := range p.Levels {
		if l := &p.Levels[i]; l.Requests > 0 && (top == nil || l.Concurrency > top.Concurrency) {
			top = l
		}
	}
	return top
}
