package matrix

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

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
	cfg.Name = p.name(cfg.Name)
	for k, v := range raw.Vars {
		if slices.Contains(reserved, k) {
			p.errf(p.loc.line("vars", k), "vars."+k, "%q is filled in by bmx and cannot be a var", k)
		}
		p.plainArg(p.loc.line("vars", k), "vars."+k, v)
		cfg.Vars[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(override)) {
		v := override[k]
		p.plainArg(0, "--var "+k, v)
		cfg.Vars[k] = v
		if cfg.VarFlags == nil {
			cfg.VarFlags = map[string]bool{}
		}
		cfg.VarFlags[k] = true
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
	p.known(cfg, raw.Known)
	p.order(cfg, raw)
	if raw.Retries < 0 || raw.Retries > 10 {
		p.errf(p.loc.line("retries"), "retries", "must be between 0 and 10, got %d", raw.Retries)
	}
	return cfg
}

// name checks the config's name, or makes one of the file's name.
func (p *parser) name(name string) string {
	// The name is printed and names the run directory: a control character
	// in it (an escape sequence) must never reach a terminal.
	if strings.ContainsFunc(name, unicode.IsControl) {
		p.errf(p.loc.line("name"), "name", "%q holds control characters: the name is printed and names the run directory", name)
	}
	if name == "" {
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return '_'
			}
			return r
		}, strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file)))
	}
	return name
}

// known checks the [[known]] entries and adds them to cfg.
func (p *parser) known(cfg *Config, known []rawKnown) {
	for i, k := range known {
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
var failureVerdicts = []string{"degraded", "wrong", "garbage", "nan", "crash", "hang", "inconclusive", "flaky"}

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
	for _, a := range s.Command {
		p.plainArg(p.loc.line("server", "command"), "server.command", a)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		_ = p.plainArg(p.loc.line("server", "env", k), "server.env."+k, k) && p.plainArg(p.loc.line("server", "env", k), "server.env."+k, s.Env[k])
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
		if !p.plainValue(line, "axis.values", x) {
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
		if ok {
			ok = p.plainValue(line, "axis.values.name", v.Name)
			for _, a := range v.Args {
				ok = ok && p.plainArg(line, "axis.values.args", a)
			}
			for _, k := range slices.Sorted(maps.Keys(v.Env)) {
				ok = ok && p.plainArg(line, "axis.values.env", k) && p.plainArg(line, "axis.values.env", v.Env[k])
			}
		}
		return v, ok
	default:
		p.errf(line, "axis.values", "must be a string or a table {name, args, env}, got %s", describe(rv))
		return Value{}, false
	}
}

// plainValue refuses a value name holding a control character: the name
// is in the cell's ID, its log file's name, every report and the
// terminal, and a NUL byte cannot even be passed to a server (bmx then
// failed to start it, and the cell read as the server's crash).
func (p *parser) plainValue(line int, key, v string) bool {
	if strings.ContainsFunc(v, unicode.IsControl) {
		p.errf(line, key, "%q holds control characters: a value names the cell, its log file and its column in every report", v)
		return false
	}
	return true
}

// plainArg refuses an argument or environment entry that no process can
// be given (a NUL byte) or that would rewrite the terminal as bmx prints
// the command (control characters other than tab and newline, which a
// JSON argument may hold).
func (p *parser) plainArg(line int, key, a string) bool {
	if strings.ContainsFunc(a, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }) {
		p.errf(line, key, "%q holds control characters: a NUL byte cannot be passed to a server, and the others would reach the terminal as bmx prints the command", a)
		return false
	}
	return true
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
