package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// registerCompletions teaches shell completion (bmx completion bash|zsh|
// fish|powershell) the values bmx's flags and arguments take: --only the
// axis=value pairs of the config named by -c (the built-in host without
// one), --format the formats each command writes, and run directories for
// the commands that read runs. The commands are found by name, so the
// commands' own files stay adapters.
func registerCompletions(root *cobra.Command) {
	runArgs := map[string]int{"report": 1, "diff": 2, "merge": -1, "history": -1, "publish": -1} // how many RUN arguments; -1: any
	runFlags := map[string][]string{"sweep": {"resume", "baseline"}, "bisect": {"resume"}}
	refuseOtherShells(root)
	for _, cmd := range root.Commands() {
		if cmd.Flags().Lookup("only") != nil {
			cmd.RegisterFlagCompletionFunc("only", completeOnly)
		}
		if f := cmd.Flags().Lookup("format"); f != nil {
			formats := formatsFromUsage(f.Usage)
			cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return formats, cobra.ShellCompDirectiveNoFileComp
			})
		}
		if n, ok := runArgs[cmd.Name()]; ok {
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if n >= 0 && len(args) >= n {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeRunDirs(cmd, toComplete)
			}
		}
		for _, name := range runFlags[cmd.Name()] {
			if cmd.Flags().Lookup(name) != nil {
				cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
					return completeRunDirs(cmd, toComplete)
				})
			}
		}
	}
}

// refuseOtherShells makes "bmx completion SHELL" for a shell cobra writes
// no script for (tcsh, say) a usage error, where cobra would print the
// completion command's help and exit 0 as if a script had been written.
func refuseOtherShells(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErrorf("completion %q: not a shell bmx writes completions for (shells: %s)", args[0], strings.Join(shells, ", "))
		}
	}
}

// formatsFromUsage reads a --format flag's usage, "table, md or json", as
// its list of formats, so the list cannot drift from the help; nil when the
// usage is not such a list.
func formatsFromUsage(usage string) []string {
	var out []string
	for _, part := range strings.Split(strings.ReplaceAll(usage, " or ", ", "), ", ") {
		part = strings.TrimSpace(part)
		if part == "" || strings.ContainsAny(part, " \t()") {
			return nil
		}
		out = append(out, part)
	}
	return out
}

// completeOnly offers axis=value pairs of the config the command line names.
// After a comma it continues the list, leaving out axes already named.
func completeOnly(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	axes := completionAxes(cmd)
	prefix, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		prefix, last = toComplete[:i+1], toComplete[i+1:]
	}
	named := map[string]bool{}
	for _, p := range strings.Split(prefix, ",") {
		if k, _, ok := strings.Cut(p, "="); ok {
			named[k] = true
		}
	}
	var out []string
	for _, a := range axes {
		if named[a.name] {
			continue
		}
		for _, v := range a.values {
			if pair := a.name + "=" + v; strings.HasPrefix(pair, last) {
				out = append(out, prefix+pair)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

type completionAxis struct {
	name   string
	values []string
}

// completionAxes are the axes of the config named by -c, with --var
// applied; when the config does not load (an undefined placeholder, a
// half-written file), the axes as written in its [[axis]] tables.
func completionAxes(cmd *cobra.Command) []completionAxis {
	path, _ := cmd.Flags().GetString("config")
	varFlags, _ := cmd.Flags().GetStringArray("var")
	vars, _ := parseVars(varFlags)
	var axes []matrix.Axis
	if cfg, err := matrix.Load(path, vars); err == nil {
		axes = cfg.Axes
	} else if path != "" {
		axes, _ = matrix.AxesAsWritten(path)
	}
	var out []completionAxis
	for _, a := range axes {
		ca := completionAxis{name: a.Name}
		for _, v := range a.Values {
			ca.values = append(ca.values, v.Name)
		}
		out = append(out, ca)
	}
	return out
}

// completeRunDirs offers the run directories (record.IsRunDir) in
// the directory toComplete is typed into, and, at the top, in the sweep's
// output directory; directories that hold runs are offered to descend
// into. With none, the shell completes directories.
func completeRunDirs(cmd *cobra.Command, toComplete string) ([]string, cobra.ShellCompDirective) {
	base := ""
	if i := strings.LastIndexAny(toComplete, `/`+string(filepath.Separator)); i >= 0 {
		base = toComplete[:i+1]
	}
	bases := []string{base}
	if base == "" {
		out := defaultOut
		if f := cmd.Flags().Lookup("out"); f != nil && f.Value.String() != "" {
			out = f.Value.String()
		}
		bases = append(bases, filepath.ToSlash(filepath.Clean(out))+"/")
	}
	var runs, holders []string
	for _, b := range bases {
		dir := b
		if dir == "" {
			dir = "."
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := b + e.Name()
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasPrefix(name, toComplete) {
				continue
			}
			switch {
			case record.IsRunDir(name):
				runs = append(runs, name)
			case holdsRuns(name):
				holders = append(holders, name+"/")
			}
		}
	}
	if len(runs)+len(holders) == 0 {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	out := append(runs, holders...)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(holders) > 0 {
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// holdsRuns reports whether dir has a run directory directly inside.
func holdsRuns(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.IsDir() && record.IsRunDir(filepath.Join(dir, e.Name()))
	})
}
