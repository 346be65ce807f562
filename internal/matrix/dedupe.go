package matrix

import (
	"slices"
	"strings"
)

// AutoValue is the axis value that lets the server pick a backend itself.
const AutoValue = "auto"

// HasAuto reports whether one of the cell's values is auto.
func (c Cell) HasAuto() bool {
	return slices.ContainsFunc(c.Values, func(av AxisValue) bool { return av.Value == AutoValue })
}

// resolvedKeys are the keys under which a server may report what an axis's
// auto became: SGLang's /get_server_info names a flag's dest
// (--moe-runner-backend: moe_runner_backend), a log line "Using X ...
// backend" is recorded as "log:..._backend"; the axis's own name, with and
// without _backend, and its env variable in lower case are tried too.
func (a *Axis) resolvedKeys() []string {
	var keys []string
	if a.Flag != "" {
		keys = append(keys, strings.ReplaceAll(strings.TrimLeft(a.Flag, "-"), "-", "_"))
	}
	if a.Env != "" {
		keys = append(keys, strings.ToLower(a.Env))
	}
	keys = append(keys, a.Name, a.Name+"_backend")
	n := len(keys)
	for _, k := range keys[:n] {
		keys = append(keys, "log:"+k)
	}
	return keys
}

// ResolvedValues maps each axis on which cell is auto to what the server
// said it resolved to (resolved as a result records it); an axis the server
// did not say is left out, and so is one it kept at auto.
func (c *Config) ResolvedValues(cell Cell, resolved map[string]string) map[string]string {
	out := map[string]string{}
	for _, av := range cell.Values {
		if av.Value != AutoValue {
			continue
		}
		a := c.axis(av.Axis)
		if a == nil {
			continue
		}
		for _, k := range a.resolvedKeys() {
			if v := resolved[k]; v != "" && v != AutoValue {
				out[av.Axis] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Twin finds the cell among cells that starts the very server an auto cell
// turned out to be: its auto values replaced by what they resolved to, all
// else equal, down to the command line and environment. ok is false when an
// auto value did not resolve, or no cell is that twin.
func (c *Config) Twin(cell Cell, resolved map[string]string, cells []Cell) (twin Cell, ok bool) {
	return c.TwinAmong(cell, resolved, func([]AxisValue) []Cell { return cells })
}

// TwinAmong is Twin where the cells to look among are found by their
// values: find returns, in order, the cells with the values wanted (or
// more), so a sweep that holds its cells unbuilt builds only those.
func (c *Config) TwinAmong(cell Cell, resolved map[string]string, find func(values []AxisValue) []Cell) (twin Cell, ok bool) {
	if !cell.HasAuto() {
		return Cell{}, false
	}
	res := c.ResolvedValues(cell, resolved)
	want := slices.Clone(cell.Values)
	for i, av := range want {
		if av.Value != AutoValue {
			continue
		}
		v, ok := res[av.Axis]
		if !ok {
			return Cell{}, false
		}
		want[i].Value = v
	}
	for _, t := range find(want) {
		if t.ID == cell.ID || !slices.Equal(t.Values, want) {
			continue
		}
		if c.sameServer(cell, t, res) {
			return t, true
		}
	}
	return Cell{}, false
}

// sameServer reports whether auto cell a, its auto values replaced by res,
// starts the server t starts: same argv, same environment. An auto value
// with args or env of its own, or an include that extends one cell and not
// the other, makes them differ.
func (c *Config) sameServer(a, t Cell, res map[string]string) bool {
	argvA, envA := c.Command(a, Runtime{})
	argvT, envT := c.Command(t, Runtime{})
	for axis, v := range res {
		ax := c.axis(axis)
		if ax.Flag != "" {
			for i := 0; i+1 < len(argvA); i++ {
				if argvA[i] == ax.Flag && argvA[i+1] == AutoValue {
					argvA[i+1] = v
				}
			}
		}
		if ax.Env != "" {
			for i, kv := range envA {
				if kv == ax.Env+"="+AutoValue {
					envA[i] = ax.Env + "=" + v
				}
			}
		}
	}
	return slices.Equal(argvA, argvT) && slices.Equal(envA, envT)
}

// withResolved is the cell's values with each auto value replaced by what it
// resolved to, where the cell records that.
func (c Cell) withResolved() []AxisValue {
	vals := slices.Clone(c.Values)
	for i, av := range vals {
		if v, ok := c.Resolved[av.Axis]; ok && av.Value == AutoValue {
			vals[i].Value = v
		}
	}
	return vals
}
