package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/launcher"
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
	flags, err := launcher.ArgparseFlags(ctx, argv)
	if err != nil {
		return withCode(ExitFailed, err)
	}
	axes := launcher.AxisFlags(flags, opts.All)
	for _, f := range axes {
		fmt.Fprintf(io.Out, "%s\n    %s\n", strings.Join(f.Names, ", "), strings.Join(f.Choices, " "))
	}
	if len(axes) == 0 {
		fmt.Fprintln(io.Err, "bmx: no backend flags with choices (try --all)")
	}
	return nil
}
