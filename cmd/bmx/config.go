package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/bmx-dev/bmx/launcher/probe"
	"github.com/bmx-dev/bmx/matrix"
)

// configOptions are the flags every command that reads a matrix shares.
type configOptions struct {
	Config string
	Vars   []string
	Only   []string
}

// load reads the config (the built-in simulated host when none is given),
// expands it and applies --only; warnings go to warn.
func (o *configOptions) load(warn io.Writer) (*matrix.Config, *matrix.Plan, error) {
	vars := map[string]string{}
	for _, v := range o.Vars {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, nil, usageErrorf("--var %q: want name=value", v)
		}
		vars[k] = val
	}
	var cfg *matrix.Config
	var err error
	if o.Config == "" {
		cfg, err = matrix.Builtin(vars)
	} else {
		cfg, err = matrix.LoadFile(o.Config, vars)
	}
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	if err := plan.Filter(cfg, o.Only); err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(warn, "bmx: warning: %s\n", w)
	}
	return cfg, plan, nil
}

// loadProbes returns the config's probe set.
func loadProbes(cfg *matrix.Config) (probe.Set, error) {
	if cfg.Probes.File != "" {
		set, err := probe.LoadFile(cfg.Probes.File)
		return set, withCode(ExitUsage, err)
	}
	set, err := probe.Builtin(cfg.Probes.Set)
	return set, withCode(ExitUsage, err)
}
