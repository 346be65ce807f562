package classify

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// TestSetup: logs of servers that died of their setup name the cause and the
// line; logs of servers that died of a backend, or that merely mention a
// missing file on the way, are not setup failures.
func TestSetup(t *testing.T) {
	sglang := []string{"python3", "-m", "sglang.launch_server", "--model-path", "/models/Qwen3-30B"}
	vllm := []string{"/opt/venv/bin/vllm", "serve", "Qwen/Qwen3-30B"}
	for _, tc := range []struct {
		name  string
		log   string
		exit  *evidence.Exit
		argv  []string
		cause string
		line  string
	}{
		{"hf local folder missing", `[2026-03-10 12:00:01] Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/transformers/utils/hub.py", line 402, in cached_file
OSError: /models/Qwen3-30B does not appear to have a file named config.json. Checkout 'https://huggingface.co//models/Qwen3-30B/tree/None' for available files.`,
			&evidence.Exit{Code: 1}, sglang, SetupModel, "OSError: /models/Qwen3-30B does not appear to have a file named config.json. Checkout 'https://huggingface.co//models/Qwen3-30B/tree/None' for available files."},
		{"hf repo id invalid", `huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/x/y/z'. Use repo_type argument if needed.`,
			&evidence.Exit{Code: 1}, sglang, SetupModel, "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/x/y/z'. Use repo_type argument if needed."},
		{"vllm invalid repo", `ERROR 03-10 12:00:01 [engine.py:123] ValueError: Invalid repository ID or local directory specified: 'models/missing'.`,
			&evidence.Exit{Code: 1}, vllm, SetupModel, "ValueError: Invalid repository ID or local directory specified: 'models/missing'."},
		{"model FileNotFoundError as the crash", `Loading safetensors checkpoint shards:   0% Completed | 0/4
Traceback (most recent call last):
FileNotFoundError: [Errno 2] No such file or directory: '/models/Qwen3-30B/model-00001-of-00004.safetensors'`,
			&evidence.Exit{Code: 1}, sglang, SetupModel, "FileNotFoundError: [Errno 2] No such file or directory: '/models/Qwen3-30B/model-00001-of-00004.safetensors'"},
		{"llama.cpp gguf", `gguf_init_from_file: failed to open GGUF file 'models/q.gguf' (No such file or directory)
llama_model_load: error loading model: llama_model_loader: failed to load model from models/q.gguf`,
			&evidence.Exit{Code: 1}, []string{"llama-server", "-m", "models/q.gguf"}, SetupModel, "gguf_init_from_file: failed to open GGUF file 'models/q.gguf' (No such file or directory)"},
		{"a shell script's missing file, nothing else said", "cat: models/q/config.json: No such file or directory",
			&evidence.Exit{Code: 1}, []string{"sh", "-c", "cat models/q/config.json && exec server"}, SetupModel, "cat: models/q/config.json: No such file or directory"},
		{"port taken", `INFO:     Started server process [4242]
ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use`,
			&evidence.Exit{Code: 1}, sglang, SetupPort, "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"},
		{"bmx cannot start it", "# bmx: cell a=x (attempt 1, slot \"\")\nbmx: start server: fork/exec /opt/sglang/bin/python: no such file or directory",
			&evidence.Exit{Code: 127}, sglang, SetupExecutable, "bmx: start server: fork/exec /opt/sglang/bin/python: no such file or directory"},
		{"shell cannot find it", "sh: 1: sglang-serve: not found", &evidence.Exit{Code: 127}, []string{"sh", "-c", "sglang-serve"}, SetupExecutable, "sh: 1: sglang-serve: not found"},
		{"exit 127 alone", "", &evidence.Exit{Code: 127}, sglang, SetupExecutable, "exit status 127"},
		{"server package missing", `/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')`,
			&evidence.Exit{Code: 1}, sglang, SetupPackage, "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')"},
		{"vllm console script package missing", `ModuleNotFoundError: No module named 'vllm'`, &evidence.Exit{Code: 1}, vllm, SetupPackage, "ModuleNotFoundError: No module named 'vllm'"},

		// A backend's failures.
		{"backend kernel package missing", `  File "/sglang/srt/layers/moe/fused_moe.py", line 12, in <module>
ModuleNotFoundError: No module named 'flashinfer'`, &evidence.Exit{Code: 1}, sglang, "", ""},
		{"jit compiler missing", `Traceback (most recent call last):
FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'`, &evidence.Exit{Code: 1}, sglang, "", ""},
		{"cuda error", `Loading safetensors checkpoint shards: 100% Completed | 4/4
[2026-03-10 12:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: CUDA error: an illegal memory access was encountered`, &evidence.Exit{Code: 1}, sglang, "", ""},
		{"a missing file mentioned, another cause", `WARNING: No such file or directory: '/root/.cache/sglang/moe_configs/E=128,N=768.json', using default config
RuntimeError: CUDA error: no kernel image is available for execution on the device`, &evidence.Exit{Code: 1}, sglang, "", ""},
		{"killed by a signal", "Segmentation fault (core dumped)", &evidence.Exit{Code: -1, Signal: "SIGSEGV"}, sglang, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause, line := Setup(Input{Log: tc.log, Exit: tc.exit}, tc.argv, nil)
			if cause != tc.cause || line != tc.line {
				t.Errorf("Setup = %q, %q\nwant   %q, %q", cause, line, tc.cause, tc.line)
			}
		})
	}
}

// TestSetupUsage: a server that refuses its command line failed of the
// setup when what it refused is not the cell's own (a fixed flag mistyped, a
// file the command names that is not there, a wrong subcommand, a required
// flag left out), and of the cell when it is (the server does not take that
// axis value: data).
func TestSetupUsage(t *testing.T) {
	usage := "usage: sglang serve [-h] --model-path MODEL_PATH [--host HOST]\n"
	own := []string{"--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend=bogus"}
	exit2 := &evidence.Exit{Code: 2}
	for _, tc := range []struct {
		name, log string
		exit      *evidence.Exit
		want      string // the cause, "" for the cell's own crash
	}{
		{"fixed flag mistyped", usage + "sglang serve: error: unrecognized arguments: --reasoning-parsr qwen3", exit2, SetupUsage},
		{"fixed flag's value refused", usage + "sglang serve: error: argument --reasoning-parser: invalid choice: 'qwen9' (choose from 'qwen3', 'glm45')", exit2, SetupUsage},
		{"file the command names missing", usage + "sglang serve: error: argument --sim-profile: can't open 'nope.toml': [Errno 2] No such file or directory: 'nope.toml'", exit2, SetupUsage},
		{"wrong subcommand", "usage: vllm [-h] [-v] {chat,complete,serve,bench} ...\nvllm: error: argument subparser: invalid choice: 'serv' (choose from 'chat', 'complete', 'serve', 'bench')", exit2, SetupUsage},
		{"required flag left out", usage + "sglang serve: error: the following arguments are required: --model-path/--model", exit2, SetupUsage},
		{"cobra subcommand", "Error: unknown command \"serv\" for \"ollama\"", &evidence.Exit{Code: 1}, SetupUsage},
		{"llama.cpp flag", "error: invalid argument: --flash-atn", &evidence.Exit{Code: 1}, SetupUsage},
		{"axis value refused", usage + "sglang serve: error: argument --moe-runner-backend: invalid choice: 'flashinfer_cutlass' (choose from 'auto', 'triton')", exit2, ""},
		{"axis value refused, --flag=value", usage + "sglang serve: error: argument --fp4-gemm-backend: invalid choice: 'bogus' (choose from 'auto')", exit2, ""},
		{"axis flag unknown to this version", usage + "sglang serve: error: unrecognized arguments: --moe-runner-backend flashinfer_cutlass", exit2, ""},
		{"argparse's words, but not its exit", usage + "sglang serve: error: unrecognized arguments: --reasoning-parsr qwen3", &evidence.Exit{Code: 1}, ""},
		{"killed, not refused", usage + "sglang serve: error: unrecognized arguments: --reasoning-parsr qwen3", &evidence.Exit{Code: -1, Signal: "SIGKILL"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause, line := Setup(Input{Log: "# bmx: cell x\n" + tc.log, Exit: tc.exit}, []string{"sglang", "serve"}, own)
			if cause != tc.want {
				t.Errorf("Setup = %q (%q), want %q", cause, line, tc.want)
			}
			if tc.want != "" && (line == "" || strings.HasPrefix(line, "usage:") || strings.HasPrefix(line, "# bmx")) {
				t.Errorf("line %q: want the error line", line)
			}
		})
	}
}
