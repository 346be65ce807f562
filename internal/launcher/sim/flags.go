// Package sim is the simulated host that `bmx sweep` runs by default: a
// server that takes SGLang's launch flags, serves SGLang's HTTP surface
// (/health, /get_model_info, /get_server_info, /v1/models,
// /v1/chat/completions), and misbehaves as a behaviour profile says for each
// backend combination: it crashes at start with a real-looking traceback and
// dies by SIGKILL, produces garbage or NaN, dies on the sampler's NaN assert
// under concurrent mixed-length batches, hangs in CUDA graph capture, or
// starts slowly. Its answers come from a small rule-based responder (echo
// "Say 'X'", arithmetic, counting) so the real probes judge it exactly as
// they judge a model.
//
// Everything it prints or serves says it is a simulation. Only cmd/bmx and
// tests import it.
package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Prog is the program name in argparse-style messages, as SGLang's parser
// names itself.
const Prog = "sglang serve"

// Choices of the backend flags, from SGLang's server_args (see
// ../shared/facts/sglang-vllm.md); argparse rejects anything else.
var (
	MoERunnerChoices = []string{"auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm",
		"experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass", "flashinfer_mxfp4",
		"flashinfer_cutedsl", "cutlass", "aiter", "marlin", "humming", "experimental_sgl_marlin", "hpc_ops", "megamoe"}
	FP4GemmChoices   = []string{"auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm", "marlin"}
	AttentionChoices = []string{"triton", "torch_native", "flex_attention", "dsa", "nsa", "cutlass_mla", "fa3", "fa4",
		"flashinfer", "flashmla", "trtllm_mla", "trtllm_mha", "aiter", "wave"}
	ReasoningParserChoices = []string{"auto", "deepseek-r1", "deepseek-v3", "glm45", "gpt-oss", "kimi", "kimi_k2",
		"qwen3", "qwen3-thinking", "minimax", "minimax-append-think", "mistral", "nemotron_3", "step3"}
)

// Options are the parsed command line.
type Options struct {
	ModelPath       string
	Host            string
	Port            int
	TP              int
	MoERunner       string
	FP4Gemm         string
	Attention       string
	ReasoningParser string
	// Profile is a behaviour profile file; "" = the embedded sm120 profile.
	Profile string
	// Version is the simulated software version (--sim-version, 0 = 1):
	// profile rules with since/before hold from or until a version.
	Version int
	// PrintVersions prints the simulated package versions and exits, as
	// a versions_command does.
	PrintVersions bool
	// Passed through without effect, as a real server would take them.
	TrustRemoteCode bool
	WatchdogTimeout string
}

// ArgError is a command-line error; like argparse, the program prints usage
// and the message and exits with status 2.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return e.Msg }

// Usage is the argparse-style usage line.
const Usage = "usage: " + Prog + " [-h] --model-path MODEL_PATH [--host HOST] [--port PORT] [--tp-size TP_SIZE]\n" +
	"                    [--moe-runner-backend {...}] [--fp4-gemm-backend {...}] [--attention-backend {...}]\n" +
	"                    [--reasoning-parser {...}] [--trust-remote-code] [--watchdog-timeout SECONDS]\n" +
	"                    [--sim-profile FILE] [--sim-version N] [--print-versions]"

type flagSpec struct {
	names   []string
	dest    string
	choices []string
	boolean bool
	help    string
	set     func(o *Options, v string) error
}

// Help is the argparse-style --help text, options and choice lists included,
// so `bmx axes` and help_check read the sim as they read SGLang.
func Help() string {
	var b strings.Builder
	b.WriteString(Usage + "\n\nA SIMULATED SGLang server for testing bmx; it uses no GPU.\n\noptions:\n")
	b.WriteString("  -h, --help            show this help message and exit\n")
	for _, f := range flagSpecs {
		var parts []string
		for _, n := range f.names {
			switch {
			case f.boolean:
				parts = append(parts, n)
			case f.choices != nil:
				parts = append(parts, n+" {"+strings.Join(f.choices, ",")+"}")
			default:
				parts = append(parts, n+" "+strings.ToUpper(f.dest))
			}
		}
		fmt.Fprintf(&b, "  %s\n                        %s\n", strings.Join(parts, ", "), f.help)
	}
	return b.String()
}

func intFlag(dst func(o *Options) *int) func(o *Options, v string) error {
	return func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("invalid int value: '%s'", v)
		}
		*dst(o) = n
		return nil
	}
}

func strFlag(dst func(o *Options) *string) func(o *Options, v string) error {
	return func(o *Options, v string) error { *dst(o) = v; return nil }
}

var flagSpecs = []flagSpec{
	{names: []string{"--model-path", "--model"}, dest: "model_path", help: "The path of the model weights.", set: strFlag(func(o *Options) *string { return &o.ModelPath })},
	{names: []string{"--host"}, dest: "host", help: "The host of the HTTP server.", set: strFlag(func(o *Options) *string { return &o.Host })},
	{names: []string{"--port"}, dest: "port", help: "The port of the HTTP server.", set: intFlag(func(o *Options) *int { return &o.Port })},
	{names: []string{"--tp-size", "--tensor-parallel-size", "--tp"}, dest: "tp_size", help: "The tensor parallelism size.", set: intFlag(func(o *Options) *int { return &o.TP })},
	{names: []string{"--moe-runner-backend"}, dest: "moe_runner_backend", choices: MoERunnerChoices, help: "Choose the runner backend for MoE.", set: strFlag(func(o *Options) *string { return &o.MoERunner })},
	{names: []string{"--fp4-gemm-backend"}, dest: "fp4_gemm_backend", choices: FP4GemmChoices, help: "Choose the runner backend for NVFP4 GEMM operations.", set: strFlag(func(o *Options) *string { return &o.FP4Gemm })},
	{names: []string{"--attention-backend"}, dest: "attention_backend", choices: AttentionChoices, help: "Choose the kernels for attention layers.", set: strFlag(func(o *Options) *string { return &o.Attention })},
	{names: []string{"--reasoning-parser"}, dest: "reasoning_parser", choices: ReasoningParserChoices, help: "Specify the parser for reasoning models.", set: strFlag(func(o *Options) *string { return &o.ReasoningParser })},
	{names: []string{"--watchdog-timeout"}, dest: "watchdog_timeout", help: "Set watchdog timeout in seconds (accepted, not simulated).", set: strFlag(func(o *Options) *string { return &o.WatchdogTimeout })},
	{names: []string{"--trust-remote-code"}, dest: "trust_remote_code", boolean: true, help: "Accepted, as SGLang takes it.", set: func(o *Options, _ string) error { o.TrustRemoteCode = true; return nil }},
	{names: []string{"--sim-version"}, dest: "sim_version", help: "The simulated software version (default 1): profile rules with since/before change behaviour at a version.", set: intFlag(func(o *Options) *int { return &o.Version })},
	{names: []string{"--print-versions"}, dest: "print_versions", boolean: true, help: "Print the simulated package versions (name=version lines) and exit.", set: func(o *Options, _ string) error { o.PrintVersions = true; return nil }},
	{names: []string{"--sim-profile"}, dest: "sim_profile", help: "A behaviour profile (TOML); the default is the embedded sm120 host.", set: strFlag(func(o *Options) *string { return &o.Profile })},
}

// ParseArgs parses SGLang-style flags. -h/--help returns ErrHelp.
func ParseArgs(args []string) (Options, error) {
	o := Options{Host: "127.0.0.1", Port: 30000, TP: 1, MoERunner: "auto", FP4Gemm: "auto"}
	var unknown []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			return o, ErrHelp
		}
		name, val, hasVal := strings.Cut(a, "=")
		spec := lookupFlag(name)
		if spec == nil {
			unknown = append(unknown, a)
			continue
		}
		if spec.boolean {
			if hasVal {
				return o, &ArgError{fmt.Sprintf("argument %s: ignored explicit argument '%s'", name, val)}
			}
			_ = spec.set(&o, "")
			continue
		}
		if !hasVal {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				return o, &ArgError{fmt.Sprintf("argument %s: expected one argument", strings.Join(spec.names, "/"))}
			}
			i++
			val = args[i]
		}
		if spec.choices != nil && !slices.Contains(spec.choices, val) {
			quoted := make([]string, len(spec.choices))
			for j, c := range spec.choices {
				quoted[j] = "'" + c + "'"
			}
			return o, &ArgError{fmt.Sprintf("argument %s: invalid choice: '%s' (choose from %s)", name, val, strings.Join(quoted, ", "))}
		}
		if err := spec.set(&o, val); err != nil {
			return o, &ArgError{fmt.Sprintf("argument %s: %v", name, err)}
		}
	}
	if len(unknown) > 0 {
		return o, &ArgError{"unrecognized arguments: " + strings.Join(unknown, " ")}
	}
	if o.Version < 0 {
		return o, &ArgError{fmt.Sprintf("argument --sim-version: invalid version %d: want 1 or more", o.Version)}
	}
	if o.ModelPath == "" && !o.PrintVersions {
		return o, &ArgError{"the following arguments are required: --model-path/--model"}
	}
	return o, nil
}

// ErrHelp asks for the usage text.
var ErrHelp = &ArgError{"help requested"}

func lookupFlag(name string) *flagSpec {
	for i := range flagSpecs {
		if slices.Contains(flagSpecs[i].names, name) {
			return &flagSpecs[i]
		}
	}
	return nil
}
