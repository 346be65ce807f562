package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/launcher"
	"github.com/bmx-dev/bmx/matrix"
)

type planOptions struct {
	configOptions
}

func newPlanCmd(io iostreams) *cobra.Command {
	opts := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the cells a sweep would run, with their exact command lines; start nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkConfigFlags(&opts.configOptions); err != nil {
				return err
			}
			return runPlan(opts, io)
		},
	}
	addConfigFlags(cmd, &opts.configOptions)
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

func runPlan(opts *planOptions, io iostreams) error {
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
	_, err = fmt.Fprint(io.Out, b.String())
	return err
}
