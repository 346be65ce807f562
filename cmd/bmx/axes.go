package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
)

type axesOptions struct {
	All   bool
	TOML  bool
	Flags []string
}

func newAxesCmd(io iostreams) *cobra.Command {
	opts := &axesOptions{}
	cmd := &cobra.Command{
		Use:   "axes [--all] [--toml] [--flag NAME]... -- COMMAND --help",
		Short: "List the backend flags an installed server accepts, with their choices, from its --help",
		Long: `Run a server's help command, parse argparse's output (choice lists wrapped over
several lines, metavars, aliases), and print each flag that has a choice list.
By default only flags whose name says backend, kernel, quantization, dtype or
parser are shown; --all shows every flag with choices; --flag names the ones
to show (any flag with a choice list).

--toml prints each as an [[axis]] block to paste into a matrix config: the
axis name is the flag without its dashes and a trailing "-backend", hyphens
turned to underscores; the values are every choice --help lists, to cut
down to the ones worth sweeping.`,
		Example: `  bmx axes -- python3 -m sglang.launch_server --help
  bmx axes --toml --flag --moe-runner-backend --flag --fp4-gemm-backend -- python3 -m sglang.launch_server --help >> matrix.toml
  bmx axes -- vllm serve --help`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAxes(cmd.Context(), opts, args, io)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "show every flag that has choices")
	cmd.Flags().BoolVar(&opts.TOML, "toml", false, "print ready-to-paste [[axis]] blocks for a matrix config")
	cmd.Flags().StringArrayVar(&opts.Flags, "flag", nil, "show this flag (repeatable; the server's flag name, e.g. --moe-runner-backend)")
	return cmd
}

func runAxes(ctx context.Context, opts *axesOptions, argv []string, io iostreams) error {
	// A command that is not there is bad usage, said in one line, not a
	// help command that failed.
	if _, err := exec.LookPath(argv[0]); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return usageErrorf("%s: no such executable (not a file, or not on $PATH): check the command after --", argv[0])
		}
		return usageErrorf("%s: cannot run it (%v): check the command after --", argv[0], errors.Unwrap(err))
	}
	flags, err := launcher.ArgparseFlags(ctx, argv)
	if err != nil {
		return withCode(ExitFailed, err)
	}
	var axes []matrix.HelpFlag
	if len(opts.Flags) > 0 {
		if axes, err = namedFlags(flags, opts.Flags, argv); err != nil {
			return withCode(ExitUsage, err)
		}
	} else {
		axes = launcher.AxisFlags(flags, opts.All)
	}
	if len(axes) == 0 {
		fmt.Fprintln(io.Err, "bmx: no backend flags with choices (try --all)")
		return nil
	}
	if opts.TOML {
		return writeAxisTOML(io.Out, axes, argv)
	}
	for _, f := range axes {
		fmt.Fprintf(io.Out, "%s\n    %s\n", strings.Join(f.Names, ", "), strings.Join(f.Choices, " "))
	}
	return nil
}

// namedFlags picks the flags --flag names, in the order named; each must be
// an option of the help with a choice list.
func namedFlags(flags map[string]matrix.HelpFlag, names []string, argv []string) ([]matrix.HelpFlag, error) {
	var out []matrix.HelpFlag
	seen := map[string]bool{}
	for _, n := range names {
		f, ok := flags[n]
		if !ok && !strings.HasPrefix(n, "-") {
			f, ok = flags["--"+n]
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("--flag %s: %s lists no such option", n, matrix.ShellJoin(argv))
		case f.Choices == nil:
			return nil, fmt.Errorf("--flag %s: %s lists no choices for it: write its values by hand", n, matrix.ShellJoin(argv))
		case seen[f.Names[0]]:
			continue
		}
		seen[f.Names[0]] = true
		out = append(out, f)
	}
	return out, nil
}

// axisName is the [[axis]] name for a flag: "--moe-runner-backend" is
// "moe_runner", "--kv-cache-dtype" "kv_cache_dtype", "-fa" "fa".
func axisName(flag string) string {
	n := strings.TrimLeft(flag, "-")
	if s := strings.TrimSuffix(n, "-backend"); s != "" {
		n = s
	}
	return strings.ReplaceAll(n, "-", "_")
}

// writeAxisTOML prints each flag as a commented [[axis]] block.
func writeAxisTOML(w io.Writer, axes []matrix.HelpFlag, argv []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Axes from `%s` (bmx axes --toml): every choice --help lists;\n", matrix.ShellJoin(argv))
	b.WriteString("# keep the values worth sweeping.\n")
	for _, f := range axes {
		b.WriteString("\n")
		if len(f.Names) > 1 {
			fmt.Fprintf(&b, "# %s (also %s)\n", f.Names[0], strings.Join(f.Names[1:], ", "))
		}
		b.WriteString("[[axis]]\n")
		fmt.Fprintf(&b, "name = %s\n", matrix.QuoteTOML(axisName(f.Names[0])))
		fmt.Fprintf(&b, "flag = %s\n", matrix.QuoteTOML(f.Names[0]))
		writeTOMLValues(&b, f.Choices)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeTOMLValues writes values = [...] on one line, or wrapped one line
// per about 80 columns when that would be long.
func writeTOMLValues(b *bytes.Buffer, values []string) {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = matrix.QuoteTOML(v)
	}
	const comment = "  # from --help"
	if line := "values = [" + strings.Join(q, ", ") + "]"; len(line)+len(comment) <= 100 {
		b.WriteString(line + comment + "\n")
		return
	}
	b.WriteString("values = [" + comment + "\n")
	line := "   "
	for _, s := range q {
		if len(line)+1+len(s)+1 > 80 && line != "   " {
			b.WriteString(line + "\n")
			line = "   "
		}
		line += " " + s + ","
	}
	b.WriteString(line + "\n]\n")
}
