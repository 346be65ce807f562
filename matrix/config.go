// Package matrix owns the sweep configuration: the TOML file a user writes
// (server command, axes of backend flags, excludes and includes, the probe
// set), its strict decoding and validation, and its expansion into the cells
// a sweep runs, each with the exact argv and environment of its server.
//
// It never starts a process: everything here is pure data, so `bmx plan` can
// show exactly what `bmx sweep` would run, and a bad config is rejected with
// its file, line and key before any GPU is touched.
package matrix

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

//go:embed engines/*.toml
var engineFS embed.FS

// Engines lists the engine profiles a config can name.
var Engines = []string{"sglang", "vllm", "sim"}

// engineProfile decodes an embedded engine profile.
func engineProfile(name string) (*rawConfig, error) {
	if !slices.Contains(Engines, name) {
		return nil, fmt.Errorf("unknown engine %q (one of %s)", name, strings.Join(Engines, ", "))
	}
	data, err := engineFS.ReadFile("engines/" + name + ".toml")
	if err != nil {
		return nil, err
	}
	var raw rawConfig
	if _, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw); err != nil {
		return nil, fmt.Errorf("engine profile %s: %w", name, err)
	}
	return &raw, nil
}

// Defaults applied by Load when the config leaves a field out.
const (
	DefaultHost         = "127.0.0.1"
	DefaultHealth       = "/health"
	DefaultReadyTimeout = 10 * time.Minute
	DefaultProbeTimeout = 2 * time.Minute
	DefaultStopGrace    = 15 * time.Second
	DefaultProbeSet     = "smoke"
)

// Config is a decoded, defaulted and validated matrix file.
type Config struct {
	// Name names the run directory; it defaults to the file's base name.
	Name string
	// Path is the file the config came from; "" for the built-in one.
	Path string
	// Source is the file's text, kept for the run's snapshot.
	Source string
	// Dir is the absolute directory of the config file ("" for the built-in
	// one), for {dir}.
	Dir    string
	Vars   map[string]string
	Server Server
	Axes   []Axis
	// Exclude and Include follow GitHub Actions matrix semantics: excludes
	// remove matching combinations first, then each include extends the
	// combinations it matches or, matching none, adds a cell of its own.
	Exclude []map[string]string
	Include []Include
	Probes  Probes
	// Slots are GPU groups cells run on concurrently; none means one slot
	// with all GPUs.
	Slots []Slot
	GPU   GPU
	// Retries is how often a crash or hang cell is run again to tell a
	// flaky backend from a broken one.
	Retries int
	// Reference picks the cell whose answers the others are compared with
	// (axis -> value); it runs first.
	Reference map[string]string
	// Known lists expected failures.
	Known []Known
	// Engine names the engine profile the config builds on ("" = none).
	Engine string
	// HelpCheck validates axis values against the server's --help before
	// anything starts.
	HelpCheck bool
	// MaxCells bounds the cells Expand builds (0: DefaultMaxCells); the
	// command line raises it with --max-cells.
	MaxCells int
	// Order is the order cells start in: OrderInformative or OrderFile
	// (the default when the key is absent, so an existing config keeps
	// its order; `bmx init` writes order = "informative" into new ones).
	// It never changes a verdict or a report's layout, only which cells
	// run first.
	Order string
	// Prune turns pruning on (sweep --prune does too); PruneAfter is its K:
	// an axis value that failed with one cause in K cells that differ in
	// every other axis has its other cells predicted instead of started.
	Prune      bool
	PruneAfter int
	// Dedupe skips a cell whose backends an "auto" cell that ran resolved
	// to: it inherits that cell's verdict instead of starting a server of
	// the same backends (sweep --dedupe does too).
	Dedupe bool
}

// Run orders (the order key).
const (
	// OrderInformative starts the reference cell, then cells that cover
	// every axis value as early as possible, likely-working ones first.
	OrderInformative = "informative"
	// OrderFile starts cells in the order the config expands to.
	OrderFile = "file"
)

// Orders lists the values of the order key.
var Orders = []string{OrderInformative, OrderFile}

// DefaultPruneAfter is prune_after's default K.
const DefaultPruneAfter = 2

// DefaultMaxCells is the most cells a config may expand to unless raised:
// at minutes of model load per cell, 10,000 cells are weeks of GPU time,
// and a bigger matrix is almost always a typo in an axis.
const DefaultMaxCells = 10000

// Known is a known issue: the cells it matches are expected to fail.
type Known struct {
	Match   map[string]string `json:"match"`
	Verdict string            `json:"verdict,omitempty"` // "" = any failure
	Issue   string            `json:"issue,omitempty"`
	Note    string            `json:"note,omitempty"`
}

// Slot is a set of GPUs one cell runs on, as CUDA_VISIBLE_DEVICES lists them
// ("0,1,2,3"); "" means all GPUs, CUDA_VISIBLE_DEVICES left as it is.
type Slot struct {
	GPUs string
}

// GPU configures the check that a slot's GPUs are free before a cell starts
// and after it ends.
type GPU struct {
	// SMI is the nvidia-smi command; bmx appends its query flags.
	SMI []string
	// BusyMiB is the memory use above which a GPU counts as held.
	BusyMiB int
	// FreeTimeout bounds the wait for a held GPU to become free.
	FreeTimeout time.Duration
}

// Defaults of the GPU check.
const (
	DefaultBusyMiB     = 1024
	DefaultFreeTimeout = 2 * time.Minute
)

// Server describes how to start one server and how to tell it is ready.
type Server struct {
	// ReadyGenerate requires a one-token generation to succeed before the
	// server counts as ready (SGLang's /health can pass before it can).
	ReadyGenerate bool
	// HelpCommand prints the server's argparse help, for help_check and
	// `bmx axes`; VersionsCommand prints "name=version" lines for the host
	// fingerprint.
	HelpCommand     []string
	VersionsCommand []string
	// Paths names vars whose values are files or directories the server
	// loads: bmx checks they exist before any server starts, whatever they
	// look like (PathVars are checked when they look local).
	Paths        []string
	Command      []string
	Env          map[string]string
	Host         string
	Health       string
	ReadyLog     *regexp.Regexp
	ReadyTimeout time.Duration
	ProbeTimeout time.Duration
	StopGrace    time.Duration
	// CellTimeout bounds a cell from its start to the end of its probes
	// (teardown not counted); 0 means ready_timeout plus a probe_timeout
	// for each probe and one more, about the most a cell whose every wait
	// runs out can take.
	CellTimeout time.Duration
}

// Axis is one dimension of the matrix, such as the MoE runner backend.
type Axis struct {
	Name string
	// Flag, if set, is passed as "Flag value" for each value.
	Flag string
	// Env, if set, is set to the value's name in the server's environment.
	Env    string
	Values []Value
}

// Value is one choice on an axis; Args and Env are extra settings that come
// with it.
type Value struct {
	Name string
	Args []string
	Env  map[string]string
}

// Include is one [[include]] entry.
type Include struct {
	Values map[string]string // axis name -> value
	Args   []string
	Env    map[string]string
}

// Probes says which probe set to send.
type Probes struct {
	Set   string // a built-in set
	File  string // a probe file, resolved against the config's directory
	Model string // the model name to request; "" = ask the server
}

// Placeholders that bmx fills in itself; every other {name} must be a var.
const (
	PlaceholderPort = "port"
	PlaceholderHost = "host"
	PlaceholderSelf = "self"
	// PlaceholderGPUs is the cell's slot ("0,1,2,3"); PlaceholderNGPUs its size,
	// e.g. for --tp {ngpus}.
	PlaceholderGPUs  = "gpus"
	PlaceholderNGPUs = "ngpus"
	// PlaceholderDir is the directory of the config file, so a config can
	// name files beside it (a server script, a profile) from any working
	// directory.
	PlaceholderDir = "dir"
)

// reserved are the placeholders bmx fills in itself.
var reserved = []string{PlaceholderPort, PlaceholderHost, PlaceholderSelf, PlaceholderGPUs, PlaceholderNGPUs, PlaceholderDir}

// ConfigError is one problem in a config file, located by line and key.
type ConfigError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// ErrInvalid is wrapped by every error Load returns for bad content, so
// callers can tell bad usage from an unreadable file.
var ErrInvalid = errors.New("invalid config")

// raw* mirror the file; they are strict, so any key not named here is an error.
type rawConfig struct {
	Name      string              `toml:"name"`
	Engine    string              `toml:"engine"`
	HelpCheck bool                `toml:"help_check"`
	Vars      map[string]string   `toml:"vars"`
	Server    rawServer           `toml:"server"`
	Axis      []rawAxis           `toml:"axis"`
	Exclude   []map[string]string `toml:"exclude"`
	Include   []map[string]any    `toml:"include"`
	Probes    rawProbes           `toml:"probes"`
	Slot      []rawSlot           `toml:"slot"`
	GPU       rawGPU              `toml:"gpu"`
	Retries   int                 `toml:"retries"`
	Reference map[string]string   `toml:"reference"`
	Known     []rawKnown          `toml:"known"`
	Order     string              `toml:"order"`
	Prune     bool                `toml:"prune"`
	PruneK    *int                `toml:"prune_after"`
	Dedupe    bool                `toml:"dedupe"`
}

type rawKnown struct {
	Match   map[string]string `toml:"match"`
	Verdict string            `toml:"verdict"`
	Issue   string            `toml:"issue"`
	Note    string            `toml:"note"`
}

type rawSlot struct {
	GPUs string `toml:"gpus"`
}

type rawGPU struct {
	SMI         []string `toml:"smi"`
	BusyMiB     *int     `toml:"busy_mib"`
	FreeTimeout string   `toml:"free_timeout"`
}

type rawServer struct {
	Command         []string          `toml:"command"`
	Env             map[string]string `toml:"env"`
	Host            string            `toml:"host"`
	Health          string            `toml:"health"`
	ReadyLog        string            `toml:"ready_log"`
	ReadyTimeout    string            `toml:"ready_timeout"`
	ProbeTimeout    string            `toml:"probe_timeout"`
	StopGrace       string            `toml:"stop_grace"`
	CellTimeout     string            `toml:"cell_timeout"`
	ReadyGenerate   *bool             `toml:"ready_generate"`
	HelpCommand     []string          `toml:"help_command"`
	VersionsCommand []string          `toml:"versions_command"`
	Paths           []string          `toml:"paths"`
}

// merge fills the fields the user left out from an engine profile.
func (u rawServer) merge(prof rawServer) rawServer {
	pick := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	out := u
	if len(out.Command) == 0 {
		out.Command = prof.Command
	}
	if len(prof.Env) > 0 {
		env := maps.Clone(prof.Env)
		maps.Copy(env, u.Env)
		out.Env = env
	}
	out.Host, out.Health, out.ReadyLog = pick(u.Host, prof.Host), pick(u.Health, prof.Health), pick(u.ReadyLog, prof.ReadyLog)
	out.ReadyTimeout, out.ProbeTimeout, out.StopGrace = pick(u.ReadyTimeout, prof.ReadyTimeout), pick(u.ProbeTimeout, prof.ProbeTimeout), pick(u.StopGrace, prof.StopGrace)
	out.CellTimeout = pick(u.CellTimeout, prof.CellTimeout)
	if out.ReadyGenerate == nil {
		out.ReadyGenerate = prof.ReadyGenerate
	}
	if out.HelpCommand == nil {
		out.HelpCommand = prof.HelpCommand
	}
	if out.VersionsCommand == nil {
		out.VersionsCommand = prof.VersionsCommand
	}
	return out
}

// AxesAsWritten reads the [[axis]] tables of a matrix file and nothing else,
// checking nothing: each axis's name, flag, env and its values' names. It
// is for shell completion, which has axes to offer from a config that does
// not load yet (a half-written file, a var not given).
func AxesAsWritten(path string) ([]Axis, error) {
	var raw struct {
		Axis []rawAxis `toml:"axis"`
	}
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return nil, err
	}
	var out []Axis
	for _, ra := range raw.Axis {
		if ra.Name == "" {
			continue
		}
		a := Axis{Name: ra.Name, Flag: ra.Flag, Env: ra.Env}
		for _, v := range ra.Values {
			switch v := v.(type) {
			case string:
				a.Values = append(a.Values, Value{Name: v})
			case map[string]any:
				if n, ok := v["name"].(string); ok {
					a.Values = append(a.Values, Value{Name: n})
				}
			}
		}
		out = append(out, a)
	}
	return out, nil
}

type rawAxis struct {
	Name   string `toml:"name"`
	Flag   string `toml:"flag"`
	Env    string `toml:"env"`
	Values []any  `toml:"values"` // a string, or a table with name, args, env
}

type rawProbes struct {
	Set   string `toml:"set"`
	File  string `toml:"file"`
	Model string `toml:"model"`
}

// LoadFile reads and validates the config at path. vars override the file's
// [vars]. Problems in the content come back joined, each a *ConfigError, all
// wrapping ErrInvalid.
func LoadFile(path string, vars map[string]string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, vars)
}

var tomlErrRe = regexp.MustCompile(`^toml: line (\d+)(?: \(last key "([^"]*)"\))?: (.*)$`)

// Parse decodes and validates a config. name is used in error messages and to
// resolve a relative probe file.
func Parse(name string, data []byte, vars map[string]string) (*Config, error) {
	src := string(data)
	var raw rawConfig
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		return nil, decodeError(name, err)
	}
	p := &parser{file: name, loc: newLocator(src)}
	if raw.Engine != "" {
		prof, err := engineProfile(raw.Engine)
		if err != nil {
			p.errf(p.loc.line("engine"), "engine", "%v", err)
		} else {
			raw.Server = raw.Server.merge(prof.Server)
			vars := maps.Clone(prof.Vars)
			maps.Copy(vars, raw.Vars)
			raw.Vars = vars
		}
	}
	for _, k := range md.Undecoded() {
		ks := k.String()
		// axis values and include entries are decoded by hand below, with
		// their own key checks.
		if strings.HasPrefix(ks, "axis.values.") || strings.HasPrefix(ks, "include.") {
			continue
		}
		p.errf(p.loc.line(k...), ks, "unknown key")
	}
	cfg := p.build(&raw, vars)
	cfg.Path = name
	cfg.Source = src
	if name != BuiltinName {
		if abs, err := filepath.Abs(filepath.Dir(name)); err == nil {
			cfg.Dir = abs
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func decodeError(file string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: %w", ErrInvalid, &ConfigError{File: file, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message})
	}
	if m := tomlErrRe.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%w: %w", ErrInvalid, &ConfigError{File: file, Line: line, Key: m[2], Msg: m[3]})
	}
	return fmt.Errorf("%w: %w", ErrInvalid, &ConfigError{File: file, Msg: err.Error()})
}

// parser collects every problem so the user sees them all at once.
type parser struct {
	file string
	loc  *locator
	errs []error
}

func (p *parser) errf(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool {
		return p.errs[i].(*ConfigError).Line < p.errs[j].(*ConfigError).Line
	})
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(p.errs...))
}

func (p *parser) build(raw *rawConfig, override map[string]string) *Config {
	cfg := &Config{
		Name:      raw.Name,
		Vars:      map[string]string{},
		Exclude:   raw.Exclude,
		Engine:    raw.Engine,
		HelpCheck: raw.HelpCheck,
		Dedupe:    raw.Dedupe,
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
	}
	for k, v := range raw.Vars {
		if slices.Contains(reserved, k) {
			p.errf(p.loc.line("vars", k), "vars."+k, "%q is filled in by bmx and cannot be a var", k)
		}
		cfg.Vars[k] = v
	}
	for k, v := range override {
		cfg.Vars[k] = v
	}
	cfg.Server = p.server(&raw.Server)
	for i := range raw.Axis {
		cfg.Axes = append(cfg.Axes, p.axis(i, &raw.Axis[i]))
	}
	if len(raw.Axis) == 0 {
		p.errf(0, "axis", "no [[axis]] defined: a sweep needs at least one")
	}
	p.checkAxisNames(cfg.Axes)
	p.checkExcludes(cfg)
	for i, inc := range raw.Include {
		cfg.Include = append(cfg.Include, p.include(i, inc, cfg))
	}
	cfg.Probes = Probes{Set: raw.Probes.Set, File: raw.Probes.File, Model: raw.Probes.Model}
	switch {
	case cfg.Probes.Set != "" && cfg.Probes.File != "":
		p.errf(p.loc.line("probes", "file"), "probes", "set and file are exclusive: name a built-in set or a probe file")
	case cfg.Probes.Set == "" && cfg.Probes.File == "":
		cfg.Probes.Set = DefaultProbeSet
	}
	if cfg.Probes.File != "" && !filepath.IsAbs(cfg.Probes.File) {
		cfg.Probes.File = filepath.Join(filepath.Dir(p.file), cfg.Probes.File)
	}
	used := p.checkPlaceholders(cfg)
	for _, k := range cfg.Server.Paths {
		if _, ok := cfg.Vars[k]; !ok {
			p.errf(p.loc.line("server", "paths"), "server.paths", "%q is not a var (server.paths names vars whose values are paths the server loads)", k)
		}
	}
	p.checkOverrides(raw.Vars, override, used)
	cfg.Slots = p.slots(raw.Slot)
	cfg.GPU = p.gpu(&raw.GPU)
	cfg.Retries = raw.Retries
	cfg.Reference = raw.Reference
	for k := range raw.Reference {
		if cfg.axis(k) == nil {
			p.errf(p.loc.line("reference", k), "reference."+k, "no axis named %q (axes: %s)", k, strings.Join(cfg.axisNames(), ", "))
		}
	}
	for i, k := range raw.Known {
		idx := "[" + strconv.Itoa(i) + "]"
		if len(k.Match) == 0 {
			p.errf(p.loc.line("known", idx), "known.match", "required: the axis values the known issue applies to")
		}
		for a := range k.Match {
			if cfg.axis(a) == nil {
				p.errf(p.loc.line("known", idx, "match"), "known.match."+a, "no axis named %q (axes: %s)", a, strings.Join(cfg.axisNames(), ", "))
			}
		}
		if k.Verdict != "" && !slices.Contains(failureVerdicts, k.Verdict) {
			p.errf(p.loc.line("known", idx, "verdict"), "known.verdict", "%q: want one of %s, or none for any failure", k.Verdict, strings.Join(failureVerdicts, ", "))
		}
		cfg.Known = append(cfg.Known, Known(k))
	}
	p.order(cfg, raw)
	if raw.Retries < 0 || raw.Retries > 10 {
		p.errf(p.loc.line("retries"), "retries", "must be between 0 and 10, got %d", raw.Retries)
	}
	return cfg
}

// order checks and defaults the order, prune and prune_after keys.
func (p *parser) order(cfg *Config, raw *rawConfig) {
	cfg.Order, cfg.Prune, cfg.PruneAfter = raw.Order, raw.Prune, DefaultPruneAfter
	if cfg.Order == "" {
		cfg.Order = OrderFile
	}
	if !slices.Contains(Orders, cfg.Order) {
		p.errf(p.loc.line("order"), "order", "%q: want one of %s", raw.Order, strings.Join(Orders, ", "))
	}
	if raw.PruneK != nil {
		cfg.PruneAfter = *raw.PruneK
		if cfg.PruneAfter < 2 {
			p.errf(p.loc.line("prune_after"), "prune_after", "must be at least 2 (cells that differ in every other axis), got %d", cfg.PruneAfter)
		}
	}
}

// failureVerdicts are the verdicts a known issue may expect (the classify
// package's, less correct; matrix does not depend on it).
var failureVerdicts = []string{"wrong", "garbage", "nan", "crash", "hang", "inconclusive", "flaky"}

var gpuListRe = regexp.MustCompile(`^\d+(,\d+)*$`)

func (p *parser) slots(raw []rawSlot) []Slot {
	var out []Slot
	seen := map[string]int{}
	for i, r := range raw {
		line := p.loc.line("slot", "["+strconv.Itoa(i)+"]", "gpus")
		gpus := strings.ReplaceAll(r.GPUs, " ", "")
		if !gpuListRe.MatchString(gpus) {
			p.errf(line, "slot.gpus", "want GPU indexes like \"0,1,2,3\", got %q", r.GPUs)
			continue
		}
		for _, g := range strings.Split(gpus, ",") {
			if j, ok := seen[g]; ok {
				p.errf(line, "slot.gpus", "GPU %s is in slot #%d too: slots must not share GPUs", g, j+1)
			}
			seen[g] = i
		}
		out = append(out, Slot{GPUs: gpus})
	}
	return out
}

func (p *parser) gpu(raw *rawGPU) GPU {
	g := GPU{SMI: raw.SMI, BusyMiB: DefaultBusyMiB, FreeTimeout: DefaultFreeTimeout}
	if len(g.SMI) == 0 {
		g.SMI = []string{"nvidia-smi"}
	}
	if raw.BusyMiB != nil {
		if *raw.BusyMiB < 0 {
			p.errf(p.loc.line("gpu", "busy_mib"), "gpu.busy_mib", "must not be negative")
		}
		g.BusyMiB = *raw.BusyMiB
	}
	if raw.FreeTimeout != "" {
		d, err := time.ParseDuration(raw.FreeTimeout)
		if err != nil || d <= 0 {
			p.errf(p.loc.line("gpu", "free_timeout"), "gpu.free_timeout", "malformed duration %q: want a positive Go duration such as \"2m\"", raw.FreeTimeout)
		} else {
			g.FreeTimeout = d
		}
	}
	return g
}

func (p *parser) server(raw *rawServer) Server {
	s := Server{
		Command:         raw.Command,
		Env:             raw.Env,
		Host:            raw.Host,
		Health:          raw.Health,
		ReadyGenerate:   raw.ReadyGenerate != nil && *raw.ReadyGenerate,
		HelpCommand:     raw.HelpCommand,
		VersionsCommand: raw.VersionsCommand,
		Paths:           raw.Paths,
	}
	if len(s.Command) == 0 {
		p.errf(p.loc.line("server", "command"), "server.command", "required: the server's argv, e.g. [\"python3\", \"-m\", \"sglang.launch_server\", ...]")
	}
	if s.Host == "" {
		s.Host = DefaultHost
	}
	if s.Health == "" {
		s.Health = DefaultHealth
	}
	if !strings.HasPrefix(s.Health, "/") {
		p.errf(p.loc.line("server", "health"), "server.health", "must be a path starting with /, got %q", s.Health)
	}
	if raw.ReadyLog != "" {
		re, err := regexp.Compile(raw.ReadyLog)
		if err != nil {
			p.errf(p.loc.line("server", "ready_log"), "server.ready_log", "bad regexp: %v", err)
		}
		s.ReadyLog = re
	}
	s.ReadyTimeout = p.duration("ready_timeout", raw.ReadyTimeout, DefaultReadyTimeout)
	s.ProbeTimeout = p.duration("probe_timeout", raw.ProbeTimeout, DefaultProbeTimeout)
	s.StopGrace = p.duration("stop_grace", raw.StopGrace, DefaultStopGrace)
	s.CellTimeout = p.duration("cell_timeout", raw.CellTimeout, 0)
	return s
}

func (p *parser) duration(key, v string, def time.Duration) time.Duration {
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.errf(p.loc.line("server", key), "server."+key, "malformed duration %q: want a positive Go duration such as \"90s\" or \"10m\"", v)
		return def
	}
	return d
}

func (p *parser) axis(i int, raw *rawAxis) Axis {
	idx := "[" + strconv.Itoa(i) + "]"
	a := Axis{Name: raw.Name, Flag: raw.Flag, Env: raw.Env}
	line := p.loc.line("axis", idx)
	if a.Name == "" {
		p.errf(line, "axis.name", "required: every [[axis]] needs a name")
	}
	if a.Flag != "" && a.Env != "" {
		p.errf(p.loc.line("axis", idx, "env"), "axis.env", "axis %q sets both flag and env: choose one", a.Name)
	}
	if len(raw.Values) == 0 {
		p.errf(p.loc.line("axis", idx, "values"), "axis.values", "axis %q is empty: give it at least one value", a.Name)
	}
	seen := map[string]int{} // times each value was seen
	for j, rv := range raw.Values {
		vline := p.loc.line("axis", idx, "values", "["+strconv.Itoa(j)+"]")
		v, ok := p.value(vline, rv)
		if !ok {
			continue
		}
		seen[v.Name]++
		if n := seen[v.Name]; n > 1 {
			if n == 2 { // one error per repeated value, at its second place
				p.errf(vline, "axis.values", "axis %q has the value %q more than once", a.Name, v.Name)
			}
			continue
		}
		if a.Flag == "" && a.Env == "" && len(v.Args) == 0 && len(v.Env) == 0 {
			p.errf(vline, "axis.values", "value %q of axis %q changes nothing: the axis has no flag or env and the value no args or env", v.Name, a.Name)
		}
		a.Values = append(a.Values, v)
	}
	return a
}

// value decodes one entry of an axis's values: a plain string or a table.
func (p *parser) value(line int, rv any) (Value, bool) {
	switch x := rv.(type) {
	case string:
		if x == "" {
			p.errf(line, "axis.values", "empty value")
			return Value{}, false
		}
		return Value{Name: x}, true
	case map[string]any:
		var v Value
		ok := true
		for k, f := range x {
			switch k {
			case "name":
				s, isStr := f.(string)
				if !isStr || s == "" {
					p.errf(line, "axis.values.name", "must be a non-empty string, got %s", describe(f))
					ok = false
				}
				v.Name = s
			case "args":
				args, good := stringList(f)
				if !good {
					p.errf(line, "axis.values.args", "must be a list of strings, got %s", describe(f))
					ok = false
				}
				v.Args = args
			case "env":
				env, good := stringMap(f)
				if !good {
					p.errf(line, "axis.values.env", "must be a table of strings, got %s", describe(f))
					ok = false
				}
				v.Env = env
			default:
				p.errf(line, "axis.values."+k, "unknown key (a value table has name, args, env)")
				ok = false
			}
		}
		if v.Name == "" && ok {
			p.errf(line, "axis.values.name", "required: a value table needs a name")
			ok = false
		}
		return v, ok
	default:
		p.errf(line, "axis.values", "must be a string or a table {name, args, env}, got %s", describe(rv))
		return Value{}, false
	}
}

func (p *parser) checkAxisNames(axes []Axis) {
	seen := map[string]bool{}
	for i, a := range axes {
		if a.Name == "" {
			continue
		}
		line := p.loc.line("axis", "["+strconv.Itoa(i)+"]", "name")
		switch {
		case seen[a.Name]:
			p.errf(line, "axis.name", "axis %q is defined twice", a.Name)
		case slices.Contains([]string{"args", "env"}, a.Name):
			p.errf(line, "axis.name", "%q is reserved for include entries; rename the axis", a.Name)
		case !axisNameRe.MatchString(a.Name):
			p.errf(line, "axis.name", "%q: use letters, digits, _ and - only (it appears in cell IDs and file names)", a.Name)
		}
		seen[a.Name] = true
	}
}

var axisNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

func (p *parser) checkExcludes(cfg *Config) {
	for i, ex := range cfg.Exclude {
		idx := "[" + strconv.Itoa(i) + "]"
		if len(ex) == 0 {
			p.errf(p.loc.line("exclude", idx), "exclude", "empty exclude would remove every cell")
		}
		for k := range ex {
			if cfg.axis(k) == nil {
				p.errf(p.loc.line("exclude", idx, k), "exclude."+k, "no axis named %q (axes: %s)", k, strings.Join(cfg.axisNames(), ", "))
			}
		}
	}
}

func (p *parser) include(i int, raw map[string]any, cfg *Config) Include {
	idx := "[" + strconv.Itoa(i) + "]"
	inc := Include{Values: map[string]string{}}
	before := len(p.errs)
	for k, f := range raw {
		line := p.loc.line("include", idx, k)
		switch k {
		case "args":
			args, ok := stringList(f)
			if !ok {
				p.errf(line, "include.args", "must be a list of strings, got %s", describe(f))
			}
			inc.Args = args
		case "env":
			env, ok := stringMap(f)
			if !ok {
				p.errf(line, "include.env", "must be a table of strings, got %s", describe(f))
			}
			inc.Env = env
		default:
			if cfg.axis(k) == nil {
				p.errf(line, "include."+k, "no axis named %q (include keys are axis names, args and env)", k)
				continue
			}
			s, ok := f.(string)
			if !ok || s == "" {
				p.errf(line, "include."+k, "must be a non-empty string, got %s", describe(f))
				continue
			}
			inc.Values[k] = s
		}
	}
	if len(inc.Values) == 0 && len(p.errs) == before {
		p.errf(p.loc.line("include", idx), "include", "an include must name at least one axis value")
	}
	return inc
}

var placeholderRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkPlaceholders makes sure every {name} in the command, env, axis values
// and includes is either filled in by bmx or defined in [vars].
func (p *parser) checkPlaceholders(cfg *Config) map[string]bool {
	used := map[string]bool{}
	check := func(line int, key, s string) {
		for _, m := range placeholderRe.FindAllStringSubmatch(s, -1) {
			name := m[1]
			used[name] = true
			if slices.Contains(reserved, name) {
				continue
			}
			if _, ok := cfg.Vars[name]; !ok {
				p.errf(line, key, "undefined placeholder {%s}: define it in [vars] or pass --var %s=...", name, name)
			}
		}
	}
	for _, s := range cfg.Server.Command {
		check(p.loc.line("server", "command"), "server.command", s)
	}
	for k, v := range cfg.Server.Env {
		check(p.loc.line("server", "env", k), "server.env."+k, v)
	}
	for i, a := range cfg.Axes {
		for j, v := range a.Values {
			line := p.loc.line("axis", "["+strconv.Itoa(i)+"]", "values", "["+strconv.Itoa(j)+"]")
			for _, s := range v.Args {
				check(line, "axis.values.args", s)
			}
			for _, s := range v.Env {
				check(line, "axis.values.env", s)
			}
		}
	}
	for i, inc := range cfg.Include {
		line := p.loc.line("include", "["+strconv.Itoa(i)+"]")
		for _, s := range inc.Args {
			check(line, "include.args", s)
		}
		for _, s := range inc.Env {
			check(line, "include.env", s)
		}
	}
	return used
}

// checkOverrides refuses a --var that names no variable of the config: not
// in [vars] (its engine profile's included) and used by no placeholder. A
// misspelt name (--var modle=...) would otherwise be dropped in silence.
func (p *parser) checkOverrides(declared, override map[string]string, used map[string]bool) {
	for _, k := range slices.Sorted(maps.Keys(override)) {
		if _, ok := declared[k]; ok || used[k] {
			continue
		}
		known := slices.Collect(maps.Keys(declared))
		for u := range used {
			if !slices.Contains(reserved, u) && !slices.Contains(known, u) {
				known = append(known, u)
			}
		}
		slices.Sort(known)
		list := "none"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		p.errf(0, "--var "+k, "the config has no variable %q (its variables: %s)", k, list)
	}
}

func (c *Config) axis(name string) *Axis {
	for i := range c.Axes {
		if c.Axes[i].Name == name {
			return &c.Axes[i]
		}
	}
	return nil
}

func (c *Config) axisNames() []string {
	names := make([]string, len(c.Axes))
	for i, a := range c.Axes {
		names[i] = a.Name
	}
	return names
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func stringMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

// describe names a decoded TOML value's type for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("float %g", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	default:
		return fmt.Sprintf("%T", v)
	}
}
