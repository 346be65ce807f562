package matrix

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sglangLikeParser declares SGLang's backend flags and choice lists
// (../shared/facts/sglang-vllm.md) with aliases and metavars, so the help
// argparse prints is real argparse output, wrapped as it wraps it.
const sglangLikeParser = `
import argparse
p = argparse.ArgumentParser(prog="sglang serve")
p.add_argument("--model-path", "--model", type=str, required=True, help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.")
p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1, help="The tensor parallelism size.")
p.add_argument("--moe-runner-backend", type=str, default="auto", choices=["auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass", "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass", "aiter", "marlin", "humming", "experimental_sgl_marlin", "hpc_ops", "megamoe"], help="Choose the runner backend for MoE.")
p.add_argument("--fp4-gemm-backend", dest="fp4_gemm_runner_backend", type=str, default="auto", choices=["auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm", "marlin"], help="Choose the runner backend for NVFP4 GEMM operations. 'auto' (default; selects flashinfer_cutedsl on SM100, marlin on SM80-SM90, flashinfer_cutlass otherwise (including SM120)).")
p.add_argument("--attention-backend", type=str, choices=["triton", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "compressed", "cutlass_mla", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "trtllm_mha", "dual_chunk_flash_attn", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu"], help="Choose the kernels for attention layers.")
p.add_argument("--sampling-backend", choices=["flashinfer", "pytorch", "ascend"], help="Choose the kernels for sampling layers.")
p.add_argument("--trust-remote-code", action="store_true", help="Whether or not to allow for custom models defined on the Hub in their own modeling files.")
p.parse_args()
`

func TestParseHelpFromArgparse(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: cannot generate real argparse help")
	}
	// A python3 on PATH may be a version manager's shim (pyenv's is a bash
	// script that runs pyenv exec), which costs more than printing the help
	// on each call: the interpreter it runs is asked for once, and the help
	// of each width comes from that interpreter itself.
	if out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output(); err == nil && filepath.IsAbs(strings.TrimSpace(string(out))) {
		py = strings.TrimSpace(string(out))
	}
	script := filepath.Join(t.TempDir(), "parser.py")
	if err := os.WriteFile(script, []byte(sglangLikeParser), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cols := range []string{"80", "60", "200"} {
		cmd := exec.Command(py, script, "--help")
		cmd.Env = append(os.Environ(), "COLUMNS="+cols)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3 --help: %v", err)
		}
		if cols == "60" && !strings.Contains(string(out), "{auto,deep_gemm") {
			t.Fatalf("unexpected help:\n%s", out)
		}
		if cols == "60" {
			// Some formatters (and newer Pythons) wrap long choice lists;
			// the same help with the list broken over lines must read alike.
			out = []byte(strings.Replace(string(out), "  --moe-runner-backend {auto,deep_gemm,", "  --moe-runner-backend {auto,\n                        deep_gemm,", 1))
			out = []byte(strings.Replace(string(out), "flashinfer_cutedsl,cutlass,", "flashinfer_cutedsl,\n                        cutlass,", 1))
		}
		flags := ParseHelp(string(out))
		moe := flags["--moe-runner-backend"]
		if len(moe.Choices) != 17 || moe.Choices[0] != "auto" || moe.Choices[16] != "megamoe" {
			t.Errorf("COLUMNS=%s: --moe-runner-backend choices %q\n%s", cols, moe.Choices, out)
		}
		if d := cmp.Diff([]string{"auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm", "marlin"}, flags["--fp4-gemm-backend"].Choices); d != "" {
			t.Errorf("COLUMNS=%s: fp4 (-want +got):\n%s", cols, d)
		}
		if n := len(flags["--attention-backend"].Choices); n != 25 {
			t.Errorf("COLUMNS=%s: %d attention choices", cols, n)
		}
		if tp := flags["--tensor-parallel-size"]; !slices.Equal(tp.Names, []string{"--tp-size", "--tensor-parallel-size"}) || tp.Choices != nil {
			t.Errorf("COLUMNS=%s: aliases %+v", cols, tp)
		}
		if !slices.Equal(flags["--model"].Names, []string{"--model-path", "--model"}) {
			t.Errorf("COLUMNS=%s: --model %+v", cols, flags["--model"])
		}
		if _, ok := flags["-h"]; !ok {
			t.Errorf("COLUMNS=%s: no -h", cols)
		}
	}
}

func TestCheckChoices(t *testing.T) {
	cfg := mustParse(t, `[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutlas"]
[[axis]]
name = "other"
flag = "--not-in-help"
values = ["x"]
`)
	plan, _ := cfg.Expand()
	flags := map[string]HelpFlag{"--moe-runner-backend": {Names: []string{"--moe-runner-backend"}, Choices: []string{"auto", "flashinfer_cutlass"}}}
	errs := cfg.CheckChoices(flags, plan)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `--moe-runner-backend "flashinfer_cutlas" is not a choice of the installed server (valid: auto, flashinfer_cutlass)`) {
		t.Errorf("errors %v", errs)
	}
}
