package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/matrix"
)

type axesOptions struct {
	All bool
}

func newAxesCmd(io iostreams) *cobra.Command {
	opts := &axesOptions{}
	cmd := &cobra.Command{
		Use:   "axes [--all] -- COMMAND --help",
		Short: "List the backend flags an installed server accepts, with their choices, from its --help",
		Long: `Run a server's help command, parse argparse's output (choice lists wrapped over
several lines, metavars, aliases), and print each flag that has a choice list.
By default only flags whose name says backend, kernel, quantization, dtype or
parser are shown; --all shows every flag with choices.`,
		Example: `  bmx axes -- python3 -m sglang.launch_server --help
  bmx axes -- vllm serve --help`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAxes(cmd.Context(), opts, args, io)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "show every flag that has choices")
	return cmd
}

func runAxes(ctx context.Context, opts *axesOptions, argv []string, io iostreams) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	flags := matrix.ParseHelp(string(out))
	if len(flags) == 0 {
		if err != nil {
			return withCode(ExitFailed, fmt.Errorf("%s: %w", matrix.ShellJoin(argv), err))
		}
		return withCode(ExitFailed, fmt.Errorf("%s printed no argparse options", matrix.ShellJoin(argv)))
	}
	seen := map[string]bool{}
	var names []string
	for _, f := range flags {
		if f.Choices == nil || seen[f.Names[0]] {
			continue
		}
		seen[f.Names[0]] = true
		if opts.All || backendish(strings.Join(f.Names, " ")) {
			names = append(names, f.Names[0])
		}
	}
	slices.Sort(names)
	for _, n := range names {
		f := flags[n]
		fmt.Fprintf(io.Out, "%s\n    %s\n", strings.Join(f.Names, ", "), strings.Join(f.Choices, " "))
	}
	if len(names) == 0 {
		fmt.Fprintln(io.Err, "bmx: no backend flags with choices (try --all)")
	}
	return nil
}

func backendish(name string) bool {
	for _, w := range []string{"backend", "kernel", "quantization", "dtype", "parser"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
