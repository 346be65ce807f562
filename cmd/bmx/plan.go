package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/launcher"
	"github.com/bmx-dev/bmx/matrix"
)

type planOptions struct {
	configOptions
	// Check runs the server's help command and refuses axis values it
	// does not accept, as help_check = true in the config does.
	Check bool
}

func newPlanCmd(io iostreams) *cobra.Command {
	opts := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the cells a sweep would run, with their exact command lines; start nothing",
		Long: `Show the cells a sweep would run, with their exact command lines; start no
server. Like sweep, it refuses (exit 2) a model, tokenizer or {dir} file the
server is told to load that does not exist, and, with --check or help_check =
true in the config, axis values the installed server's --help does not accept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkConfigFlags(&opts.configOptions); err != nil {
				return err
			}
			return runPlan(cmd.Context(), opts, io)
		},
	}
	addConfigFlags(cmd, &opts.configOptions)
	cmd.Flags().BoolVar(&opts.Check, "check", false, "run the server's help command (server.help_command) and refuse axis values it does not accept, as help_check = true does")
	return cmd
}

// slotFor shows {gpus} as the slot a cell would get if slots took cells in
// turn; at run time the first free slot takes the next cell.
func slotFor(cfg *matrix.Config, i int) string {
	if len(cfg.Slots) == 0 {
		return ""
	}
	return cfg.Slots[i%len(cfg.Slots)].GPUs
}

func runPlan(ctx context.Context, opts *planOptions, io iostreams) error {
	cfg, plan, err := opts.load(io.Err)
	if err != nil {
		return err
	}
	set, err := launcher.ProbeSet(cfg)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	for _, w := range launcher.ShapeOnly(set, plan.Reference) {
		fmt.Fprintf(io.Err, "bmx: warning: %s\n", w)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d cells", cfg.Name, len(plan.Cells))
	if len(plan.Excluded) > 0 {
		fmt.Fprintf(&b, ", %d excluded", len(plan.Excluded))
	}
	b.WriteString(" ({port} is a free port chosen when each cell starts)\n")
	for i, cell := range plan.Cells {
		argv, env := cfg.Command(cell, matrix.Runtime{Self: selfExecutable(), GPUs: slotFor(cfg, i)})
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, cell.ID)
		if len(env) > 0 {
			fmt.Fprintf(&b, "   env:  %s\n", matrix.ShellJoin(matrix.RedactEnv(env)))
		}
		fmt.Fprintf(&b, "   argv: %s\n", matrix.ShellJoin(matrix.RedactArgv(argv)))
	}
	for _, cell := range plan.Excluded {
		fmt.Fprintf(&b, "\nexcluded: %s\n", cell.ID)
	}
	if _, err := fmt.Fprint(io.Out, b.String()); err != nil {
		return err
	}
	if errs := planChecks(ctx, cfg, plan, opts.Check); len(errs) > 0 {
		return withCode(ExitUsage, errors.Join(errs...))
	}
	return nil
}

// planChecks are the checks of a sweep that need no server start: the paths
// the server is told to load (sweep's preflight) and, when asked for, the
// axis values against the server's --help (sweep's help_check). Each error
// reads as sweep's does.
func planChecks(ctx context.Context, cfg *matrix.Config, plan *matrix.Plan, check bool) []error {
	var errs []error
	for _, e := range cfg.MissingPaths(plan.Cells) {
		errs = append(errs, fmt.Errorf("preflight: %w", e))
	}
	if !cfg.HelpCheck && !check {
		return errs
	}
	flags, err := launcher.HelpFlags(ctx, cfg, selfExecutable())
	if err != nil {
		return append(errs, fmt.Errorf("help_check: %w", err))
	}
	for _, e := range cfg.CheckChoices(flags, plan) {
		errs = append(errs, fmt.Errorf("help_check: %w", e))
	}
	return errs
}
