package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/reports"
)

type probeOptions struct {
	URL     string
	Model   string
	Probes  string
	Timeout time.Duration
	JSON    bool
	Engine  string
}

func newProbeCmd(io iostreams) *cobra.Command {
	opts := &probeOptions{}
	cmd := &cobra.Command{
		Use:   "probe --url URL",
		Short: "Send the smoke probe set to a server that is already up and judge the answers",
		Example: `  bmx probe --url http://127.0.0.1:30000
  bmx probe --url http://127.0.0.1:8000 --probes my-probes.toml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.URL == "" {
				return usageErrorf("--url is required")
			}
			if err := launcher.CheckURL(opts.URL); err != nil {
				return usageErrorf("--url %v", err)
			}
			if opts.Engine != "" && opts.Engine != "sglang" && opts.Engine != "vllm" {
				return usageErrorf("--engine %q: want sglang or vllm", opts.Engine)
			}
			return runProbe(cmd.Context(), opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.URL, "url", "", "the server's base URL, e.g. http://127.0.0.1:30000")
	cmd.Flags().StringVar(&opts.Model, "model", "", "model name to request (default: the first of /v1/models)")
	cmd.Flags().StringVar(&opts.Probes, "probes", "", "probe file (default: the built-in smoke set)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "timeout of each request")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the judgement and observations as JSON")
	cmd.Flags().StringVar(&opts.Engine, "engine", "", "the server's engine, sglang or vllm (default: try SGLang's endpoints, then OpenAI's)")
	return cmd
}

func runProbe(ctx context.Context, opts *probeOptions, io iostreams) error {
	set := probe.Smoke()
	if opts.Probes != "" {
		var err error
		if set, err = probe.LoadFile(opts.Probes); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	if err := launcher.Reachable(ctx, opts.URL); err != nil {
		if ctx.Err() != nil {
			return withCode(ExitInterrupted, errSilent)
		}
		return withCode(ExitInfra, err)
	}
	client := &probe.Client{BaseURL: opts.URL, Model: opts.Model, Timeout: opts.Timeout, Engine: opts.Engine}
	j, obs := launcher.ProbeServer(ctx, client, set)
	if ctx.Err() != nil {
		return withCode(ExitInterrupted, errSilent)
	}
	if opts.JSON {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			classify.Judgement
			Observations []evidence.Observation `json:"observations"`
		}{j, obs}); err != nil {
			return err
		}
	} else if err := reports.ProbeTable(io.Out, opts.URL, j); err != nil {
		return err
	}
	if j.Verdict != classify.Correct {
		return withCode(ExitFailed, fmt.Errorf("%s: %s", j.Verdict, j.Reason))
	}
	return nil
}
