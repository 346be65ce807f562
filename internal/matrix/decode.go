package matrix

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
	undecoded := map[string]bool{}
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	for _, k := range md.Undecoded() {
		ks := k.String()
		// axis values and include entries are decoded by hand below, with
		// their own key checks.
		if strings.HasPrefix(ks, "axis.values.") || strings.HasPrefix(ks, "include.") {
			continue
		}
		// A misplaced table's keys are not reported again under it.
		if underUndecoded(k, undecoded) {
			continue
		}
		msg := "unknown key"
		if last := k[len(k)-1]; len(k) > 1 && slices.Contains(topLevelKeys(), last) {
			msg += fmt.Sprintf(" (%s is a top-level key: write it before the first [table], or TOML puts it in the table above it)", last)
		}
		p.errf(p.loc.line(k...), ks, "%s", msg)
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

// underUndecoded reports whether a key that holds k is undecoded itself.
func underUndecoded(k toml.Key, undecoded map[string]bool) bool {
	for n := 1; n < len(k); n++ {
		if undecoded[k[:n].String()] {
			return true
		}
	}
	return false
}

// topLevelKeys are the keys a config has outside any table, read from
// rawConfig's tags.
func topLevelKeys() []string {
	t := reflect.TypeFor[rawConfig]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		keys = append(keys, strings.Split(t.Field(i).Tag.Get("toml"), ",")[0])
	}
	return keys
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
