package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/launcher/sim"
)

// TestInitPlan: the starter configs parse, and plan prints the commands a
// user would otherwise type by hand.
func TestInitPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, engine := range []string{"sglang", "vllm", "sim"} {
		path := filepath.Join(dir, engine+".toml")
		code, _, stderr := bmx(t, "init", "--engine", engine, "--model", "/models/Qwen3.5-397B-A17B-NVFP4", "--tp", "8", "-o", path)
		if code != ExitOK {
			t.Fatalf("%s: exit %d\n%s", engine, code, stderr)
		}
		code, stdout, stderr := bmx(t, "plan", "-c", path)
		if code != ExitOK {
			t.Fatalf("%s: plan exit %d\n%s", engine, code, stderr)
		}
		switch engine {
		case "sglang":
			if strings.Count(stdout, "argv: python3 -m sglang.launch_server --model-path /models/Qwen3.5-397B-A17B-NVFP4 --host 127.0.0.1 --port {port} --tp 8 --trust-remote-code --reasoning-parser qwen3 --watchdog-timeout 120 --moe-runner-backend") != 13 {
				t.Errorf("sglang plan:\n%s", stdout)
			}
		case "vllm":
			if strings.Count(stdout, "env:  VLLM_NVFP4_GEMM_BACKEND=flashinfer-") != 15 || !strings.Contains(stdout, "argv: vllm serve /models/Qwen3.5-397B-A17B-NVFP4 --host 127.0.0.1 --port {port} --tensor-parallel-size 8") {
				t.Errorf("vllm plan:\n%s", stdout)
			}
		}
	}
	if code, _, stderr := bmx(t, "init", "--engine", "sglang", "-o", filepath.Join(dir, "sglang.toml")); code != ExitUsage || !strings.Contains(stderr, "exists; use --force") {
		t.Errorf("overwrite: exit %d %s", code, stderr)
	}
	if code, _, stderr := bmx(t, "init", "--engine", "trt"); code != ExitUsage || !strings.Contains(stderr, `unknown engine "trt"`) {
		t.Errorf("bad engine: exit %d %s", code, stderr)
	}
}

// TestHelpCheck: a misspelt backend is rejected from the server's own --help
// before anything is launched.
func TestHelpCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "m.toml")
	os.WriteFile(path, []byte(`engine = "sim"
help_check = true
[vars]
model = "m"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutlas"]
`), 0o644)
	out := filepath.Join(dir, "runs")
	code, _, stderr := bmx(t, "sweep", "-c", path, "--out", out)
	if code != ExitUsage || !strings.Contains(stderr, `--moe-runner-backend "flashinfer_cutlas" is not a choice of the installed server (valid: auto, deep_gemm,`) {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a rejected config created a run directory")
	}
	if leftovers := simProcesses(t, dir); len(leftovers) > 0 {
		t.Errorf("servers were started: %v", leftovers)
	}
}

func TestAxesCommand(t *testing.T) {
	t.Parallel()
	self, _ := os.Executable()
	code, stdout, stderr := bmx(t, "axes", "--", self, "sim-server", "--help")
	if code != ExitOK || !strings.Contains(stdout, "--fp4-gemm-backend\n    auto flashinfer_cudnn flashinfer_cutedsl flashinfer_cutlass flashinfer_trtllm marlin\n") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, _ := bmx(t, "axes", "--", "true"); code != ExitFailed {
		t.Errorf("a command without options: exit %d", code)
	}
}

// TestSecretsRedacted: secrets in the config never reach what bmx writes.
func TestSecretsRedacted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "m.toml")
	os.WriteFile(path, []byte(`[vars]
hf_token = "hf_SECRETVAR"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--api-key", "sk-SECRETFLAG"]
env = { HF_TOKEN = "{hf_token}", OPENAI_API_KEY = "sk-SECRETENV" }
ready_timeout = "5s"
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_trtllm"]
`), 0o644)
	out := filepath.Join(dir, "runs")
	// The simulated server refuses --api-key: the sweep stops after its
	// first cell as a broken setup, and its message quotes the refusal.
	code, _, stderr := bmx(t, "sweep", "-c", path, "--out", out, "-q")
	if code != ExitInfra || !strings.Contains(stderr, "unrecognized arguments: --api-key <redacted>") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	_, plan, _ := bmx(t, "plan", "-c", path)
	written := plan + stderr
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			written += string(mustRead(t, p))
		}
		return nil
	})
	for _, secret := range []string{"hf_SECRETVAR", "sk-SECRETFLAG", "sk-SECRETENV"} {
		if strings.Contains(written, secret) {
			t.Errorf("%s was written", secret)
		}
	}
	if !strings.Contains(written, "<redacted>") {
		t.Error("nothing was redacted")
	}
}

func TestProbeEngineFlag(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{ModelPath: "/m", MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cudnn", TP: 1}, sim.DefaultProfile(), &bytes.Buffer{})
	s.SetReady()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	code, stdout, _ := bmx(t, "probe", "--url", srv.URL, "--engine", "vllm", "--json")
	if code != ExitOK || !strings.Contains(stdout, `"endpoint": "/v1/models"`) {
		t.Errorf("exit %d\n%.2000s", code, stdout)
	}
	if code, _, _ := bmx(t, "probe", "--url", srv.URL, "--engine", "tgi"); code != ExitUsage {
		t.Errorf("bad engine: exit %d", code)
	}
}
