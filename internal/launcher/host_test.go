package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// fixtures are nvidia-smi outputs captured on a real H200.
var fixtures = testenv.SharedPath("fixtures", "h200")

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	testenv.Need(t, filepath.Join(fixtures, name))
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseGPUInfoFixtures(t *testing.T) {
	want := []record.GPU{{Index: 0, Name: "NVIDIA H200", ComputeCap: "9.0", Driver: "580.159.04", MemoryMiB: 143771}}
	for _, name := range []string{"smi_csv_nh.txt", "smi_csv.txt"} {
		got, err := ParseGPUInfo(fixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
	if v := ParseCUDAVersion(fixture(t, "smi.txt")); v != "13.0" {
		t.Errorf("CUDA version %q", v)
	}
	if _, err := ParseGPUInfo([]byte("GPU0, x\n")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *--query-gpu*) cat %q ;; *) cat %q ;; esac\n",
		filepath.Join(fixtures, "smi_csv_nh.txt"), filepath.Join(fixtures, "smi.txt"))
	fixture(t, "smi.txt")
	os.WriteFile(smi, []byte(script), 0o755)
	cfg, err := matrix.Parse("f.toml", []byte(fmt.Sprintf(`[server]
command = ["srv", "--port", "{port}"]
versions_command = ["sh", "-c", "echo torch=2.12.0.dev20260310; echo sglang=0.5.23; echo noise"]
[gpu]
smi = [%q]
[[axis]]
name = "a"
flag = "--a"
values = ["x"]
`, smi)), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := Fingerprint(context.Background(), cfg, "bmx")
	if h.GPU != "NVIDIA H200" || h.Driver != "580.159.04" || h.CUDA != "13.0" || len(h.GPUs) != 1 || h.GPUs[0].ComputeCap != "9.0" {
		t.Errorf("host %+v", h)
	}
	if d := cmp.Diff(map[string]string{"torch": "2.12.0.dev20260310", "sglang": "0.5.23"}, h.Versions); d != "" {
		t.Errorf("versions (-want +got):\n%s", d)
	}
	if s := h.Summary(); !strings.Contains(s, "1x NVIDIA H200 (compute 9.0), driver 580.159.04, CUDA 13.0; sglang 0.5.23, torch 2.12.0.dev20260310") {
		t.Errorf("summary %q", s)
	}

	cfg.GPU.SMI = []string{filepath.Join(dir, "absent-smi")}
	cfg.Server.VersionsCommand = []string{filepath.Join(dir, "absent-python")}
	h = Fingerprint(context.Background(), cfg, "bmx")
	if h.CUDA != "unknown" || h.Driver != "unknown" || len(h.Notes) != 2 || h.Hostname == "" {
		t.Errorf("without the tools: %+v", h)
	}
}

func TestRepro(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "probes.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CUDA_VISIBLE_DEVICES=0,1", server.MarkerEnv + "=run/cell#1", "HF_TOKEN=<redacted>"}
	cd := "cd " + matrix.ShellJoin([]string{dir}) + " && "
	tests := []struct {
		name string
		env  []string
		argv []string
		want string
	}{
		{"no relative path: no cd", env, []string{"python3", "-m", "sglang.launch_server", "--kw", `{"a": 1}`},
			`env CUDA_VISIBLE_DEVICES=0,1 'HF_TOKEN=<redacted>' python3 -m sglang.launch_server --kw '{"a": 1}'`},
		{"a model file by a relative name", nil, []string{"llama-server", "-m", "stories260K.gguf"}, cd + "llama-server -m stories260K.gguf"},
		{"./ in a --flag=value", nil, []string{"vllm", "serve", "--model=./models/q"}, cd + "vllm serve --model=./models/q"},
		{"a file that is there", nil, []string{"server", "--probes", "probes.toml"}, cd + "server --probes probes.toml"},
		{"a relative path in the environment", []string{"MODEL=../m.gguf"}, []string{"server"}, cd + "env MODEL=../m.gguf server"},
		{"absolute and home paths: no cd", nil, []string{"/opt/llama-server", "-m", "/models/m.gguf", "--cache", "~/cache"}, "/opt/llama-server -m /models/m.gguf --cache '~/cache'"},
		{"a Hugging Face id and a URL: no cd", nil, []string{"vllm", "serve", "Qwen/Qwen3-30B", "--url", "http://h/x/y"}, "vllm serve Qwen/Qwen3-30B --url http://h/x/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Repro(dir, tt.env, tt.argv); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
