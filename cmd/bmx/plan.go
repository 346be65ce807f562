package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
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
server. It warns of a model, tokenizer or {dir} file the server is told to
load that does not exist here (sweep refuses it), and, with help_check = true
in the config, refuses (exit 2) axis values the installed server's --help does
not accept.

--check checks the config against this host as sweep would before starting
anything: missing paths and values the server's --help does not accept are
errors (exit 2), and so is a help command that cannot run.`,
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
	cfg, plan, err := opts.loadStream(io.Err)
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
	// What a plan prints is redacted as a sweep's record is.
	secrets := cfg.Secrets(os.Environ())
	self := selfExecutable()
	b := bufio.NewWriter(io.Out)
	fmt.Fprintf(b, "%s: %d cells", cfg.Name, plan.Len())
	if plan.ExcludedLen() > 0 {
		fmt.Fprintf(b, ", %d excluded", plan.ExcludedLen())
	}
	b.WriteString(" ({port} is a free port chosen when each cell starts)\n")
	i := 0
	for cell := range plan.All() {
		argv, env := cfg.Command(cell, matrix.Runtime{Self: self, GPUs: slotFor(cfg, i)})
		i++
		fmt.Fprintf(b, "\n%d. %s\n", i, secrets.Text(cell.ID))
		if len(env) > 0 {
			fmt.Fprintf(b, "   env:  %s\n", matrix.ShellJoin(secrets.Env(env)))
		}
		fmt.Fprintf(b, "   argv: %s\n", matrix.ShellJoin(secrets.Argv(argv)))
	}
	for cell := range plan.Excluded() {
		fmt.Fprintf(b, "\nexcluded: %s\n", secrets.Text(cell.ID))
	}
	if err := b.Flush(); err != nil {
		return err
	}
	errs, warnings := planChecks(ctx, cfg, plan, opts.Check)
	for _, w := range warnings {
		for i, line := range strings.Split(secrets.Text(w.Error()), "\n") {
			if i == 0 {
				fmt.Fprintf(io.Err, "bmx: warning: %s\n", line)
			} else {
				fmt.Fprintf(io.Err, "bmx:   %s\n", line)
			}
		}
	}
	if len(errs) > 0 {
		return withCode(ExitUsage, errors.New(secrets.Text(errors.Join(errs...).Error())))
	}
	return nil
}

// planChecks are the checks of a sweep that start no server: the paths the
// server is told to load (sweep's preflight) and the axis values against the
// server's --help (sweep's help_check, run when the config has it or check
// asks). Each reads as sweep's does. A plan is often made away from the GPU
// host, so without check a missing path and a help command that cannot run
// here are warnings; an axis value the server's --help refuses is an error.
func planChecks(ctx context.Context, cfg *matrix.Config, plan *matrix.Stream, check bool) (errs, warnings []error) {
	hostSide := &warnings
	if check {
		hostSide = &errs
	}
	for _, e := range cfg.MissingPathsIn(plan.All()) {
		*hostSide = append(*hostSide, fmt.Errorf("preflight: %w", e))
	}
	for _, e := range launcher.SimProfileErrors(cfg, selfExecutable()) {
		*hostSide = append(*hostSide, fmt.Errorf("preflight: %w", e))
	}
	switch {
	case !cfg.HelpCheck && !check:
		return errs, warnings
	case !cfg.HelpCheck && len(cfg.Server.HelpCommand) == 0:
		warnings = append(warnings, fmt.Errorf("--check: %s has no server.help_command (nor an engine with one): its axis values are not checked", cfg.Path))
		return errs, warnings
	}
	help, err := launcher.ServerHelp(ctx, cfg, selfExecutable())
	if err != nil {
		*hostSide = append(*hostSide, fmt.Errorf("help_check: %w", err))
		return errs, warnings
	}
	e, w := cfg.CheckHelp(help, plan, selfExecutable())
	for _, e := range e {
		errs = append(errs, fmt.Errorf("help_check: %w", e))
	}
	for _, w := range w {
		warnings = append(warnings, fmt.Errorf("help_check: %w", w))
	}
	return errs, warnings
}
