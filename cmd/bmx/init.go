package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/matrix"
)

type initOptions struct {
	Engine string
	Model  string
	TP     int
	Output string
	Force  bool
}

func newInitCmd(io iostreams) *cobra.Command {
	opts := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter matrix.toml for an engine (sglang, vllm or sim)",
		Long: `Write a commented starter matrix.toml for --engine: its engine profile, a
reference cell, help_check and the informative order, and the backend axes
worth sweeping: for sglang and vllm, an NVFP4 MoE model's MoE runner x FP4
GEMM backends (as on SM120 Blackwell); for sim, the simulated SGLang server
(bmx sim-server), to try bmx and probe sets without a GPU. Edit the model,
the axes and their values, then check it with bmx plan -c FILE.`,
		Example: `  bmx init --engine sglang --model /models/Qwen3.5-397B-A17B-NVFP4 --tp 8 > matrix.toml
  bmx init --engine vllm -o vllm.toml
  bmx plan -c matrix.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.Engine, "engine", "sglang", strings.Join(matrix.Engines, ", "))
	cmd.Flags().StringVar(&opts.Model, "model", "", "model path or name")
	cmd.Flags().IntVar(&opts.TP, "tp", 1, "tensor parallel size")
	outFlag(cmd, &opts.Output, "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite the --output file if it exists")
	return cmd
}

func runInit(opts *initOptions, io iostreams) error {
	text, err := matrix.Starter(matrix.StarterOptions{Engine: opts.Engine, Model: opts.Model, TP: opts.TP, File: opts.Output})
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if opts.Output == "" {
		_, err := fmt.Fprint(io.Out, text)
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if opts.Force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(opts.Output, flags, 0o644)
	if os.IsExist(err) {
		return usageErrorf("%s exists; use --force to overwrite it", opts.Output)
	}
	if err != nil {
		return withCode(ExitInfra, err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return withCode(ExitInfra, err)
	}
	if err := f.Close(); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintf(io.Err, "bmx: wrote %s; check it with: bmx plan -c %s\n", opts.Output, opts.Output)
	return nil
}
