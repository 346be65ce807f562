package matrix

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// AxisValue is one coordinate of a cell.
type AxisValue struct {
	Axis  string `json:"axis"`
	Value string `json:"value"`
}

// Cell is one combination of axis values: one server start.
type Cell struct {
	// ID is stable and readable: "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn",
	// axes in config order.
	ID     string      `json:"id"`
	Values []AxisValue `json:"values"`
	// Args are appended to the server command; Env is added to its environment.
	Args []string          `json:"args,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// Resolved maps each axis on which the cell is auto to what the server
	// said auto became (set on a result once the server said it; see
	// Config.ResolvedValues). Known issues match it as well as the values.
	Resolved map[string]string `json:"resolved_values,omitempty"`
}

// Value returns the cell's value on axis, if it has one.
func (c Cell) Value(axis string) (string, bool) {
	for _, av := range c.Values {
		if av.Axis == axis {
			return av.Value, true
		}
	}
	return "", false
}

// Plan is a config expanded into cells.
type Plan struct {
	Cells []Cell
	// Excluded are combinations removed by [[exclude]], kept for the report.
	Excluded []Cell
	// Warnings are problems that do not stop a sweep (an exclude that matches
	// nothing).
	Warnings []string
	// Reference is the ID of the reference cell ("" = none); it is first in
	// Cells.
	Reference string
}

// Expand turns the config into cells: the Cartesian product of the axes in
// config order (the first axis varies slowest), minus excludes, then includes
// applied in order with GitHub Actions semantics; the reference cell first.
// It builds every cell: Stream gives them one at a time.
func (c *Config) Expand() (*Plan, error) {
	s, err := c.Stream(nil)
	if err != nil {
		return nil, err
	}
	return s.Plan(), nil
}

// Count is the number of combinations the axes span, before excludes and
// includes; it can exceed any int, so it is counted exactly.
func (c *Config) Count() *big.Int {
	n := big.NewInt(1)
	for _, a := range c.Axes {
		n.Mul(n, big.NewInt(int64(len(a.Values))))
	}
	return n
}

// checkSize refuses a matrix of more combinations than the limit before
// any cell is built, naming the axes and the count.
func (c *Config) checkSize() error {
	limit := c.MaxCells
	if limit <= 0 {
		limit = DefaultMaxCells
	}
	n := c.Count()
	if n.Cmp(big.NewInt(int64(limit+len(c.Include)))) <= 0 {
		return nil
	}
	var axes []string
	for _, a := range c.Axes {
		axes = append(axes, fmt.Sprintf("%s %d", a.Name, len(a.Values)))
	}
	where := c.Path
	if where == "" {
		where = BuiltinName
	}
	return fmt.Errorf("%w: %s: the axes span %s cells (%s), more than the limit of %d: narrow the axes or raise the limit with --max-cells N",
		ErrInvalid, where, n.String(), strings.Join(axes, " x "), limit)
}

// Matches reports whether the known issue applies to cell: to its values, or
// to them with each auto value replaced by what it resolved to (an issue of
// flashinfer_cutlass is one of an auto that became flashinfer_cutlass).
func (k Known) Matches(cell Cell) bool {
	return matches(cell.Values, k.Match) || len(cell.Resolved) > 0 && matches(cell.withResolved(), k.Match)
}

// matches reports whether every pair of want is in combo.
func matches(combo []AxisValue, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, av := range combo {
			if av.Axis == k {
				found = av.Value == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// cell renders a combination's flags and environment. shown, when not nil,
// is combo as a cell shows it (Stream's combos keep it, so that a million
// cells do not each ask whether every value is a secret).
func (c *Config) cell(combo, shown []AxisValue, incs []Include) Cell {
	cell := Cell{Env: map[string]string{}}
	if len(combo) > 0 {
		// Exact sizes: a sweep of a million cells holds them all.
		cell.Values = make([]AxisValue, 0, len(combo))
		n := 0
		for _, inc := range incs {
			n += len(inc.Args)
		}
		for _, av := range combo {
			if a := c.axis(av.Axis); a.Flag != "" {
				n += 2
			}
		}
		if n > 0 {
			cell.Args = make([]string, 0, n)
		}
	}
	var id strings.Builder
	for i, av := range combo {
		a := c.axis(av.Axis)
		// A value passed as a secret (an axis whose flag or env name looks
		// secret, or a key-shaped value) is never written: the cell's id and
		// values carry a stable stand-in, the argv and env the real value.
		sh := av
		if shown != nil {
			sh = shown[i]
		} else {
			sh.Value = a.Shown(av.Value)
		}
		cell.Values = append(cell.Values, sh)
		if i > 0 {
			id.WriteByte(',')
		}
		id.WriteString(sh.Axis)
		id.WriteByte('=')
		id.WriteString(sh.Value)
		v := Value{Name: av.Value}
		if i := slices.IndexFunc(a.Values, func(x Value) bool { return x.Name == av.Value }); i >= 0 {
			v = a.Values[i]
		}
		if a.Flag != "" {
			cell.Args = append(cell.Args, a.Flag, v.Name)
		}
		if a.Env != "" {
			cell.Env[a.Env] = v.Name
		}
		cell.Args = append(cell.Args, v.Args...)
		maps.Copy(cell.Env, v.Env)
	}
	for _, inc := range incs {
		cell.Args = append(cell.Args, inc.Args...)
		maps.Copy(cell.Env, inc.Env)
	}
	cell.ID = id.String()
	if len(cell.Env) == 0 {
		cell.Env = nil
	}
	return cell
}

// maskSecret is a secret's stand-in: distinct secrets stay distinct cells.
func maskSecret(v string) string {
	h := fnv.New32a()
	h.Write([]byte(v))
	return fmt.Sprintf("secret-%08x", h.Sum32())
}

func formatPairs(m map[string]string) string {
	return "{" + strings.Join(Pairs(m), ", ") + "}"
}

// Pairs is m as "key=value" strings, sorted by key: an environment list,
// or a known issue's match as it is written.
func Pairs(m map[string]string) []string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return parts
}

// splitOnly splits comma-separated "axis=value" pairs of --only entries.
func (c *Config) splitOnly(only []string) []string {
	var out []string
	for _, o := range only {
		start := len(out)
		for _, piece := range strings.Split(o, ",") {
			k, _, ok := strings.Cut(piece, "=")
			if len(out) > start && (!ok || c.axis(k) == nil) {
				out[len(out)-1] += "," + piece
				continue
			}
			out = append(out, piece)
		}
	}
	return out
}

// Filter keeps the cells whose values match every "axis=value" in only.
// One entry may hold several pairs separated by commas, as a cell ID does
// ("moe_runner=cutlass,fp4_gemm=cudnn"); a piece that does not start with
// an axis name and "=" continues the value before it ("a=x,y" is x,y). The
// reference cell is kept whatever only says, with a warning when only does
// not name it: the cells are judged against its answers.
func (p *Plan) Filter(c *Config, only []string) error {
	want, err := c.parseOnly(only)
	if err != nil {
		return err
	}
	if len(want) == 0 {
		return nil
	}
	var kept []Cell
	matched, hasRef := false, false
	for _, cell := range p.Cells {
		ok := want.keeps(cell.Values)
		matched = matched || ok
		isRef := p.Reference != "" && cell.ID == p.Reference
		if isRef && !ok {
			// The other cells are judged against the reference's answers
			// and logprobs: without it a degraded cell would read correct.
			// It runs as in every shard (see Assignment).
			p.Warnings = append(p.Warnings, fmt.Sprintf("the reference cell %s is not among the --only cells: it runs as well, since the others are judged against it", p.Reference))
			ok = true
		}
		hasRef = hasRef || isRef
		if ok {
			kept = append(kept, cell)
		}
	}
	if !matched {
		return fmt.Errorf("%w: --only %s matches no cell", ErrInvalid, strings.Join(only, " "))
	}
	if p.Reference != "" && !hasRef {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the reference cell %s is not a cell of the plan: answers are not compared with it", p.Reference))
		p.Reference = ""
	}
	p.Cells = kept
	return nil
}

// Runtime is what bmx fills in when it starts a cell's server.
type Runtime struct {
	Self string // the bmx executable
	Port int    // 0 leaves {port} as is, for plans
	// GPUs is the slot's CUDA_VISIBLE_DEVICES ("" = all, unknown count).
	GPUs string
}

// Render fills the placeholders of an argv that is not a cell's (the help or
// versions command).
func (c *Config) Render(args []string, rt Runtime) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = c.fill(a, rt)
	}
	return out
}

// Command renders a cell's argv and the environment additions (KEY=value,
// sorted) for its server.
func (c *Config) Command(cell Cell, rt Runtime) (argv []string, env []string) {
	fill := func(s string) string { return c.fill(s, rt) }
	for _, s := range c.Server.Command {
		argv = append(argv, fill(s))
	}
	for _, s := range cell.Args {
		argv = append(argv, fill(s))
	}
	merged := maps.Clone(c.Server.Env)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, cell.Env)
	for k, v := range merged {
		env = append(env, k+"="+fill(v))
	}
	sort.Strings(env)
	return argv, env
}

// fill replaces the placeholders of s.
func (c *Config) fill(s string, rt Runtime) string {
	if !strings.Contains(s, "{") {
		return s // most of a command: a flag, a value
	}
	return placeholderRe.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		switch name {
		case PlaceholderPort:
			if rt.Port == 0 {
				return m
			}
			return strconv.Itoa(rt.Port)
		case PlaceholderHost:
			return c.Server.Host
		case PlaceholderSelf:
			if rt.Self == "" {
				return m
			}
			return rt.Self
		case PlaceholderDir:
			if c.Dir == "" {
				return m
			}
			return c.Dir
		case PlaceholderGPUs:
			if rt.GPUs == "" {
				return m
			}
			return rt.GPUs
		case PlaceholderNGPUs:
			if rt.GPUs == "" {
				return m
			}
			return strconv.Itoa(strings.Count(rt.GPUs, ",") + 1)
		}
		if v, ok := c.Vars[name]; ok {
			return v
		}
		return m
	})
}

// ShellJoin quotes argv for display as a POSIX shell would need it, so a
// plan's command can be pasted to reproduce a cell by hand.
func ShellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// Unresolved lists the placeholders left in a rendered argv or environment:
// {gpus} without a slot, for instance.
func Unresolved(parts ...[]string) []string {
	var out []string
	for _, list := range parts {
		for _, s := range list {
			for _, m := range placeholderRe.FindAllString(s, -1) {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}
