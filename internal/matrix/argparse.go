package matrix

import (
	"fmt"
	"slices"
	"strings"
)

// HelpFlag is one option of an argparse --help text.
type HelpFlag struct {
	Names   []string // "--tp-size", "--tensor-parallel-size"
	Choices []string // nil when the option has no choice list
	// Value says the option takes a value (it has a metavar or a choice
	// list); Metavar is what the help calls it ("TP_SIZE", "FILE").
	Value   bool
	Metavar string
}

// ParseHelp reads the options of an argparse --help text (SGLang's and
// vLLM's servers print one): each option's names and aliases, and its choice
// list "{a,b,c}", which argparse may wrap over several lines. Options are
// keyed by each of their names.
func ParseHelp(text string) map[string]HelpFlag {
	out := map[string]HelpFlag{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trim := strings.TrimLeft(line, " ")
		if len(line)-len(trim) < 1 || !strings.HasPrefix(trim, "-") {
			continue
		}
		// The invocation runs to a gap of two spaces outside braces, or to
		// the end of the line; an open brace continues on the next lines.
		var inv strings.Builder
		depth := 0
		j := i
		s := trim
	scan:
		for {
			for k := 0; k < len(s); k++ {
				c := s[k]
				switch {
				case c == '{':
					depth++
				case c == '}':
					depth--
				case depth == 0 && c == ' ' && k+1 < len(s) && s[k+1] == ' ':
					break scan
				}
				if depth > 0 && (c == ' ' || c == '\t') {
					continue // argparse wraps choice lists at spaces it adds
				}
				inv.WriteByte(c)
			}
			if depth <= 0 || j+1 >= len(lines) {
				break
			}
			j++
			s = strings.TrimSpace(lines[j])
		}
		if depth > 0 {
			continue // an unclosed brace: not an option line after all
		}
		i = j
		f := parseInvocation(inv.String())
		for _, n := range f.Names {
			out[n] = f
		}
	}
	return out
}

// parseInvocation splits "--a X, --b X" or "--c {x,y}" into names and
// choices.
func parseInvocation(inv string) HelpFlag {
	var f HelpFlag
	if a := strings.IndexByte(inv, '{'); a >= 0 {
		if b := strings.IndexByte(inv[a:], '}'); b > 0 {
			f.Choices = strings.Split(inv[a+1:a+b], ",")
			inv = inv[:a] + inv[a+b+1:]
		}
	}
	for _, part := range strings.Split(inv, ",") {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "-") {
			continue
		}
		name, meta, _ := strings.Cut(part, " ")
		name, eq, hasEq := strings.Cut(name, "=")
		if hasEq {
			meta = eq
		}
		if meta = strings.TrimSpace(meta); meta != "" && f.Metavar == "" {
			f.Metavar = meta
		}
		f.Value = f.Value || meta != "" || f.Choices != nil
		if !slices.Contains(f.Names, name) {
			f.Names = append(f.Names, name)
		}
	}
	return f
}

// CheckChoices validates the values of every axis that passes a flag
// against the server's choices for it; each bad value is one error that lists
// the valid ones. Axes whose flag the help does not list are skipped. The
// cells are gone through once, so a Stream's are built once.
func (c *Config) CheckChoices(flags map[string]HelpFlag, plan Cells) []error {
	type check struct {
		axis   *Axis
		f      HelpFlag
		seen   map[string]bool
		values []string // in the order the cells have them
	}
	var checks []*check
	for i, a := range c.Axes {
		f, ok := flags[a.Flag]
		if a.Flag == "" || !ok || f.Choices == nil {
			continue
		}
		checks = append(checks, &check{axis: &c.Axes[i], f: f, seen: map[string]bool{}})
	}
	if len(checks) == 0 {
		return nil
	}
	for cell := range plan.All() {
		for _, ch := range checks {
			v, has := cell.Value(ch.axis.Name)
			if has && !ch.seen[v] {
				ch.seen[v] = true
				ch.values = append(ch.values, v)
			}
		}
	}
	var errs []error
	for _, ch := range checks {
		for _, v := range ch.values {
			if !slices.Contains(ch.f.Choices, v) {
				errs = append(errs, fmt.Errorf("%s: axis %s: %s %q is not a choice of the installed server (valid: %s)",
					c.Path, ch.axis.Name, ch.axis.Flag, v, strings.Join(ch.f.Choices, ", ")))
			}
		}
	}
	return errs
}
