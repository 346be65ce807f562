package matrix

import (
	"fmt"
	"slices"
	"strings"
)

// Help is what the installed server's help command printed: its argparse
// options, and what is needed to read the server's command against them.
type Help struct {
	// Argv is the help command as run (placeholders filled).
	Argv []string
	// Flags are the options, keyed by each of their names (ParseHelp).
	Flags map[string]HelpFlag
	// Partial says the help lists only some options and names a way to list
	// the rest (vLLM's "--help=all"): a flag it leaves out may still exist.
	Partial bool
}

// NewHelp reads the text a help command (argv) printed.
func NewHelp(argv []string, text string) *Help {
	return &Help{Argv: argv, Flags: ParseHelp(text), Partial: strings.Contains(text, "--help=")}
}

// CheckHelp checks the config against the installed server's help before any
// server starts: the axis values (CheckChoices) and the fixed part of the
// server command (CheckCommand). Errors refuse the config; warnings say what
// could not be checked. self fills {self}.
func (c *Config) CheckHelp(h *Help, plan Cells, self string) (errs, warnings []error) {
	errs = c.CheckChoices(h.Flags, plan)
	for _, a := range c.Axes {
		if _, ok := h.lookup(a.Flag); a.Flag != "" && !ok && !h.Partial {
			warnings = append(warnings, fmt.Errorf("%s: axis %s: %s is not an option of the installed server's help (%s): every value will be refused unless the server takes it after all", c.Path, a.Name, a.Flag, ShellJoin(h.Argv)))
		}
	}
	e, w := c.CheckCommand(h, self)
	return append(errs, e...), append(warnings, w...)
}

// CheckCommand checks the fixed part of the server command (server.command
// with the vars filled in, without the cells' own arguments) against the
// help: a flag the help does not list (a typo would crash every cell the
// same way), a value outside a flag's choices, a file that a flag whose
// metavar says FILE names and that does not exist. The server's own flags
// follow the help command's program part (the help command without its
// --help): where server.command runs the same program with another
// subcommand or module, that is an error too. A partial help (Partial) makes
// unknown flags warnings.
func (c *Config) CheckCommand(h *Help, self string) (errs, warnings []error) {
	argv := c.Render(c.Server.Command, Runtime{Self: self})
	prog := helpProgram(h.Argv)
	at := indexSeq(argv, prog)
	if len(prog) == 0 || at < 0 {
		if len(prog) > 0 && len(argv) > 0 && argv[0] == prog[0] {
			return []error{fmt.Errorf("%s: server.command runs %s, but server.help_command describes %s: a wrong subcommand or module?",
				c.Path, ShellJoin(argv[:min(len(argv), len(prog))]), ShellJoin(prog))}, nil
		}
		return nil, []error{fmt.Errorf("%s: server.command does not run %s (server.help_command without its --help): its fixed flags are not checked", c.Path, ShellJoin(prog))}
	}
	args := argv[at+len(prog):]
	var unlisted []string // by a partial help
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !isFlag(a) {
			continue // a positional argument, or a placeholder's value
		}
		name, val, inline := strings.Cut(a, "=")
		f, ok := h.lookup(name)
		if !ok {
			if h.Partial {
				unlisted = append(unlisted, name)
			} else {
				errs = append(errs, fmt.Errorf("%s: server.command: %s is not an option of the installed server (%s)%s", c.Path, name, ShellJoin(h.Argv), suggest(name, h.Flags)))
			}
			if !inline && i+1 < len(args) && !isFlag(args[i+1]) {
				i++ // its value, whatever it is
			}
			continue
		}
		if !f.Value && !inline {
			continue
		}
		if !inline {
			if i+1 >= len(args) || isFlag(args[i+1]) {
				continue // argparse says so if the value is required
			}
			i++
			val = args[i]
		}
		if f.Choices != nil && !strings.ContainsAny(val, "{}") && !slices.Contains(f.Choices, val) {
			errs = append(errs, fmt.Errorf("%s: server.command: %s %q is not a choice of the installed server (valid: %s)", c.Path, name, val, strings.Join(f.Choices, ", ")))
		}
		if strings.Contains(strings.ToUpper(f.Metavar), "FILE") && val != "" && !strings.ContainsAny(val, "{}") && missing(val) {
			errs = append(errs, fmt.Errorf("%s: server.command: %s %q does not exist", c.Path, name, val))
		}
	}
	if len(unlisted) > 0 {
		warnings = append(warnings, fmt.Errorf("%s: server.command: %s not checked: %s lists only some options (it names a --help=... for the rest)",
			c.Path, strings.Join(unlisted, ", "), ShellJoin(h.Argv)))
	}
	return errs, warnings
}

// lookup finds the option name names, or the one option it abbreviates, as
// argparse accepts an unambiguous prefix of a long option.
func (h *Help) lookup(name string) (HelpFlag, bool) {
	if f, ok := h.Flags[name]; ok {
		return f, true
	}
	if !strings.HasPrefix(name, "--") {
		return HelpFlag{}, false
	}
	var found []HelpFlag
	for n, f := range h.Flags {
		if strings.HasPrefix(n, name) && !slices.ContainsFunc(found, func(g HelpFlag) bool { return slices.Equal(g.Names, f.Names) }) {
			found = append(found, f)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return HelpFlag{}, false
}

// helpProgram is the help command up to its --help (or -h): the program and
// the subcommand or module whose options it prints.
func helpProgram(argv []string) []string {
	for i, a := range argv {
		if a == "-h" || a == "--help" || strings.HasPrefix(a, "--help=") {
			return argv[:i]
		}
	}
	return argv
}

// indexSeq is where seq starts in s, -1 if nowhere.
func indexSeq(s, seq []string) int {
	for i := 0; i+len(seq) <= len(s); i++ {
		if slices.Equal(s[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}

// isFlag reports whether a reads as an option rather than a value (a
// negative number is a value, as argparse takes it).
func isFlag(a string) bool {
	return len(a) > 1 && a[0] == '-' && (a[1] < '0' || a[1] > '9') && a[1] != '.'
}

// suggest names the option closest to name, when one is close: "; did you
// mean --x?".
func suggest(name string, flags map[string]HelpFlag) string {
	best, bestD := "", len(name)/3+1
	for n := range flags {
		if d := editDistance(name, n); d < bestD || d == bestD && best != "" && n < best {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
