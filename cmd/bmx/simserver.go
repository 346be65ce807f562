package main

import (
	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/launcher/sim"
)

func newSimServerCmd(io iostreams) *cobra.Command {
	return &cobra.Command{
		Use:   "sim-server [sglang flags]",
		Short: "Run the simulated SGLang server that the built-in sweep launches",
		Long: `sim-server is a SIMULATED SGLang server for testing bmx and probe sets; it uses
no GPU. It takes SGLang's launch flags (--model-path, --host, --port, --tp,
--moe-runner-backend, --fp4-gemm-backend, --attention-backend,
--reasoning-parser), serves SGLang's HTTP API, and behaves per backend
combination as its behaviour profile says (--sim-profile FILE; the embedded
default is the sm120 host). Bad flags exit 2 with an argparse-style message.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sim.Main(args, io.Out, io.Err); code != 0 {
				return withCode(code, errSilent)
			}
			return nil
		},
	}
}
