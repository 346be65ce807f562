package sim

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/BurntSushi/toml"
)

//go:embed profiles/*.toml
var profileFS embed.FS

// Behaviours a rule can give a backend combination.
const (
	Correct  = "correct"   // starts and answers right
	Crash    = "crash"     // dies at start with a traceback, by SIGKILL
	Garbage  = "garbage"   // answers with multilingual token salad
	NaN      = "nan"       // HTTP 500 when logprobs are asked, "!!!!" text otherwise
	NaNBatch = "nan-batch" // right alone; dies on the sampler's NaN assert under a mixed batch
	Hang     = "hang"      // stuck in CUDA graph capture, never ready
	Slow     = "slow"      // correct after a long start
	// Drift answers right, but its logprobs part from a healthy backend's:
	// the chosen tokens are the same, less certain (a kernel that is subtly
	// off: fluent text, a slightly worse model).
	Drift = "drift"
	// Wedge answers its first generation right, then its scheduler wedges:
	// every later generation is held until the client gives up, while
	// /health, model info and the model list (served without the
	// scheduler) still answer.
	Wedge = "wedge"
)

var behaviours = []string{Correct, Crash, Garbage, NaN, NaNBatch, Hang, Slow, Drift, Wedge, Wrong, Derail, Tie}

// Profile maps backend combinations to behaviours.
type Profile struct {
	Name        string            `toml:"name"`
	Description string            `toml:"description"`
	GPU         string            `toml:"gpu"`
	Startup     duration          `toml:"startup"`
	Speed       Speed             `toml:"speed"`
	Auto        map[string]string `toml:"resolve"`
	Rules       []Rule            `toml:"rule"`
}

// Speed is how fast a simulated backend streams: the time to its first
// token and the time per token after it, for one request alone. Under
// concurrent streams each request slows by batchSlowdown per other stream,
// as a batch costs more per step than one sequence, so the server's total
// throughput grows with concurrency while each user's rate falls.
type Speed struct {
	FirstToken duration `toml:"first_token_latency"`
	Token      duration `toml:"token_latency"`
}

// Default speeds of a profile that sets none: fast, so a sweep's
// performance probe costs little.
const (
	defaultFirstToken = 4 * time.Millisecond
	defaultToken      = time.Millisecond
)

// Rule gives the combinations matching When (resolved server args, by their
// SGLang names) a behaviour.
type Rule struct {
	When      map[string]string `toml:"when"`
	Behaviour string            `toml:"behaviour"`
	// Variant tells wrong answers apart: backends whose rules share a
	// variant give the same wrong answer (one bug), others another.
	Variant       string   `toml:"variant"`
	Error         string   `toml:"error"` // crash: the exception line
	Frame         string   `toml:"frame"` // crash: the file the traceback ends in
	Startup       duration `toml:"startup"`
	IgnoreSIGTERM bool     `toml:"ignore_sigterm"`
	// Speed overrides the profile's speed for these combinations (each
	// field that is set).
	Speed Speed `toml:"speed"`
	// Since and Before bound the simulated versions (--sim-version) the
	// rule holds for: Since <= version < Before, 0 for no bound. A rule
	// out of its range is passed over, so a later rule decides: a nightly
	// that breaks (or slows, or fixes) a combination from a version on.
	Since  int `toml:"since"`
	Before int `toml:"before"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("malformed duration %q", b)
	}
	d.Duration = v
	return nil
}

// matchKeys are the server args a rule can match on.
var matchKeys = []string{"moe_runner_backend", "fp4_gemm_backend", "attention_backend", "reasoning_parser", "tp_size"}

// DefaultProfile is the embedded sm120 profile.
func DefaultProfile() *Profile {
	data, err := profileFS.ReadFile("profiles/sm120.toml")
	if err != nil {
		panic(err) // embedded at build time
	}
	p, err := ParseProfile("sm120.toml", data)
	if err != nil {
		panic(err) // tested
	}
	return p
}

// ParseProfile decodes and checks a profile strictly.
func ParseProfile(name string, data []byte) (*Profile, error) {
	var p Profile
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("%s: unknown key %s", name, k))
	}
	if len(p.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: no [[rule]]", name))
	}
	for i, r := range p.Rules {
		if !slices.Contains(behaviours, r.Behaviour) {
			errs = append(errs, fmt.Errorf("%s: rule #%d: unknown behaviour %q (one of %v)", name, i+1, r.Behaviour, behaviours))
		}
		if r.Since < 0 || r.Before < 0 || (r.Before > 0 && r.Before <= r.Since) {
			errs = append(errs, fmt.Errorf("%s: rule #%d: since %d, before %d: want 0 <= since < before (0: no bound)", name, i+1, r.Since, r.Before))
		}
		for k := range r.When {
			if !slices.Contains(matchKeys, k) {
				errs = append(errs, fmt.Errorf("%s: rule #%d: cannot match on %q (one of %v)", name, i+1, k, matchKeys))
			}
		}
	}
	if p.Startup.Duration == 0 {
		p.Startup.Duration = time.Second
	}
	if p.Speed.FirstToken.Duration == 0 {
		p.Speed.FirstToken.Duration = defaultFirstToken
	}
	if p.Speed.Token.Duration == 0 {
		p.Speed.Token.Duration = defaultToken
	}
	for i, r := range p.Rules {
		if r.Speed.FirstToken.Duration < 0 || r.Speed.Token.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: rule #%d: negative speed", name, i+1))
		}
	}
	if p.Speed.FirstToken.Duration < 0 || p.Speed.Token.Duration < 0 {
		errs = append(errs, fmt.Errorf("%s: negative speed", name))
	}
	return &p, errors.Join(errs...)
}

// Resolved are the server args after "auto" is resolved.
type Resolved map[string]string

// Resolve applies the profile's auto resolution to the options.
func (p *Profile) Resolve(o Options) Resolved {
	r := Resolved{
		"moe_runner_backend": o.MoERunner,
		"fp4_gemm_backend":   o.FP4Gemm,
		"attention_backend":  o.Attention,
		"reasoning_parser":   o.ReasoningParser,
		"tp_size":            fmt.Sprint(o.TP),
		versionKey:           fmt.Sprint(o.version()),
	}
	for k, v := range r {
		if v == "auto" || v == "" {
			if res, ok := p.Auto[k]; ok {
				r[k] = res
			}
		}
	}
	return r
}

// SpeedOf is the speed of a combination: its rule's, where set, else the
// profile's.
func (p *Profile) SpeedOf(rule Rule) Speed {
	sp := p.Speed
	if rule.Speed.FirstToken.Duration > 0 {
		sp.FirstToken = rule.Speed.FirstToken
	}
	if rule.Speed.Token.Duration > 0 {
		sp.Token = rule.Speed.Token
	}
	return sp
}

// Rule returns the first rule matching the resolved args (and holding for
// their simulated version); a combination no rule matches behaves correctly.
func (p *Profile) Rule(r Resolved) Rule {
	for _, rule := range p.Rules {
		ok := rule.holdsAt(r.version())
		for k, v := range rule.When {
			if r[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return rule
		}
	}
	return Rule{Behaviour: Correct}
}
