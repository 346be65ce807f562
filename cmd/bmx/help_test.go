package main

import (
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// defaultClaim finds a default a flag's help text states itself:
// "(default: X)" or "(default X)".
var defaultClaim = regexp.MustCompile(`\(default:? ([^()]*(\([^()]*\)[^()]*)*)\)`)

// TestHelpDefaults keeps --help and behaviour from drifting apart. Cobra
// prints a flag's own default (its DefValue, what the code reads when the
// flag is left out); a help text that states a default as well must not
// contradict it, so it may do so only for a flag whose DefValue is empty or
// zero, whose default the code settles later. Each of those is listed
// here with the value the code settles on, which the help must name; a new
// one fails until it is listed.
func TestHelpDefaults(t *testing.T) {
	t.Parallel()
	builtin, _, err := launcher.LoadMatrix("", nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	configHelp := "the built-in simulated " + strings.ToUpper(strings.TrimPrefix(builtin.Name, "sim-")) + " host"
	settled := map[string]string{
		"sweep --config":      configHelp,
		"plan --config":       configHelp,
		"slurm --config":      configHelp,
		"bisect --config":     configHelp,
		"sweep --order":       builtin.Order + " when it has none",
		"sweep --prune-after": strconv.Itoa(matrix.DefaultPruneAfter),
		"probe --probes":      "the built-in " + probe.Smoke().Name + " set",
	}
	// Defaults that are a behaviour, not a value the code holds.
	behaviours := map[string]string{
		"probe --model":     "asks the server's /v1/models",
		"probe --engine":    "tries one API, then the other",
		"slurm --bmx":       "os.Executable",
		"slurm --partition": "sbatch without --partition",
	}
	if builtin.Order != matrix.OrderFile {
		t.Errorf("a config without an order key runs %q; sweep --help says %q", builtin.Order, matrix.OrderFile)
	}
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			key := c.Name() + " --" + f.Name
			m := defaultClaim.FindStringSubmatch(f.Usage)
			if m == nil {
				return
			}
			seen[key] = true
			if !zeroDefault(f) {
				t.Errorf("%s: help says default %q and cobra prints the flag's own, %q: say it once", key, m[1], f.DefValue)
			}
			want, ok := settled[key]
			switch {
			case ok && !strings.Contains(m[1], want):
				t.Errorf("%s: help says the default is %q; the code uses %q", key, m[1], want)
			case !ok && behaviours[key] == "":
				t.Errorf("%s: help states a default (%q) this test does not know: add it with the value the code uses", key, m[1])
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCmd(iostreams{Out: io.Discard, Err: io.Discard})
	walk(root)
	for key := range settled {
		if !seen[key] {
			t.Errorf("%s: its help no longer states a default: drop it here", key)
		}
	}
	for key := range behaviours {
		if !seen[key] {
			t.Errorf("%s: its help no longer states a default: drop it here", key)
		}
	}
	// diff's long help names --fail-on's default too.
	diff, _, err := root.Find([]string{"diff"})
	if err != nil {
		t.Fatal(err)
	}
	if def := diff.Flags().Lookup("fail-on").DefValue; !strings.Contains(diff.Long, "(default: "+strings.Trim(def, "[]")+")") {
		t.Errorf("diff --help's text does not name --fail-on's default %s", def)
	}
	// Every verdict is in bmx --help.
	for _, v := range append(classify.Verdicts, classify.Skipped, classify.Excluded, classify.Predicted) {
		if !regexp.MustCompile(`\b` + string(v) + `\b`).MatchString(root.Long) {
			t.Errorf("bmx --help does not name the verdict %s", v)
		}
	}
}

// zeroDefault reports whether a flag's default is its type's zero value,
// which cobra does not print.
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]", "0s":
		return true
	}
	return false
}

// TestHelpDefaultsShown: the defaults cobra prints are in the help a real
// bmx process prints, where a user reads them.
func TestHelpDefaultsShown(t *testing.T) {
	t.Parallel()
	code, out, stderr := runBMX(t, "sweep", "--help")
	if code != ExitOK {
		t.Fatalf("sweep --help: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		`--out string .* \(default "` + defaultOut + `"\)`,
		`--max-cells int .* \(default ` + strconv.Itoa(matrix.DefaultMaxCells) + `\)`,
		`--order string .* \(default: the config's order key; ` + matrix.OrderFile + ` when it has none`,
		`report\.md, report\.html and\s+report\.json`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("sweep --help lacks %s", want)
		}
	}
}
