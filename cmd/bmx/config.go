package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// configOptions are the flags every command that reads a matrix shares.
type configOptions struct {
	Config   string
	Vars     []string
	Only     []string
	MaxCells int
}

// parseVars turns --var name=value flags into a map; a later flag wins.
func parseVars(flags []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, v := range flags {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--var %q: want name=value", v)
		}
		vars[k] = val
	}
	return vars, nil
}

// load reads the config (the built-in simulated host when none is given),
// expands it and applies --only; warnings go to warn.
func (o *configOptions) load(warn io.Writer) (*matrix.Config, *matrix.Plan, error) {
	vars, err := parseVars(o.Vars)
	if err != nil {
		return nil, nil, err
	}
	cfg, plan, err := launcher.LoadMatrix(o.Config, vars, o.Only, o.MaxCells)
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(warn, "bmx: warning: %s\n", w)
	}
	return cfg, plan, nil
}

// loadStream is load for a plan: the cells are built one at a time as they
// are printed, so that a plan of a million cells (--max-cells raised) holds
// none of them whole.
func (o *configOptions) loadStream(warn io.Writer) (*matrix.Config, *matrix.Stream, error) {
	vars, err := parseVars(o.Vars)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := matrix.Load(o.Config, vars)
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	cfg.MaxCells = o.MaxCells
	stream, err := cfg.Stream(o.Only)
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	for _, w := range stream.Warnings {
		fmt.Fprintf(warn, "bmx: warning: %s\n", w)
	}
	return cfg, stream, nil
}
