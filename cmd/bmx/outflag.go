package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// outFlag binds the one output flag of a command that writes a file or a
// directory, spelt the same in every command: -o and --out, with --output
// taken for --out, since people guess either word.
func outFlag(cmd *cobra.Command, p *string, value, usage string) {
	f := cmd.Flags()
	f.StringVarP(p, "out", "o", value, usage)
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "output" {
			name = "out"
		}
		return pflag.NormalizedName(name)
	})
}
