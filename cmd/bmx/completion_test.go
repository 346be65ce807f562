package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/record"
)

// complete runs bmx's hidden __complete command, as a shell's completion
// script does, and returns the candidates and the directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	code, stdout, stderr := bmx(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != ExitOK {
		t.Fatalf("__complete %q: exit %d\n%s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete %q: no directive line in %q", args, stdout)
	}
	if len(lines) == 1 {
		return nil, cobra.ShellCompDirective(d)
	}
	return lines[:len(lines)-1], cobra.ShellCompDirective(d)
}

func TestCompleteOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	undefined := filepath.Join(dir, "undefined.toml")
	os.WriteFile(undefined, []byte(`[server]
command = ["{self}", "sim-server", "--model-path", "{model}", "--port", "{port}"]
[[axis]]
name = "fa"
flag = "-fa"
values = ["on", { name = "off", args = ["--x"] }]
`), 0o644)
	llama := filepath.Join("..", "..", "examples", "llamacpp", "matrix.toml")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"built-in host", []string{"sweep", "--only", ""}, []string{
			"moe_runner=flashinfer_cutlass", "moe_runner=flashinfer_trtllm", "moe_runner=flashinfer_cutedsl",
			"fp4_gemm=flashinfer_cudnn", "fp4_gemm=flashinfer_cutlass", "fp4_gemm=flashinfer_cutedsl", "fp4_gemm=flashinfer_trtllm"}},
		{"a prefix", []string{"plan", "--only", "fp4_gemm=flashinfer_cut"}, []string{"fp4_gemm=flashinfer_cutlass", "fp4_gemm=flashinfer_cutedsl"}},
		{"after a comma, the other axes", []string{"sweep", "--only", "moe_runner=flashinfer_trtllm,"}, []string{
			"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cutlass",
			"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cutedsl", "moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_trtllm"}},
		{"-c names the config", []string{"plan", "-c", llama, "--only", "cache_"}, []string{
			"cache_k=f32", "cache_k=f16", "cache_k=bf16", "cache_k=q8_0", "cache_k=q4_0", "cache_v=f16", "cache_v=q8_0"}},
		{"--config after --only", []string{"sweep", "--config", llama, "--only", "flash"}, []string{"flash_attn=on", "flash_attn=off"}},
		{"a config that does not load yet", []string{"sweep", "-c", undefined, "--only", ""}, []string{"fa=on", "fa=off"}},
		{"no config file", []string{"sweep", "-c", filepath.Join(dir, "missing.toml"), "--only", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, d := complete(t, tc.args...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if d != cobra.ShellCompDirectiveNoFileComp {
				t.Errorf("directive %d, want no file completion", d)
			}
		})
	}
}

func TestCompleteFormat(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string][]string{
		"report": {"table", "md", "html", "json", "csv", "junit", "known"},
		"diff":   {"table", "md", "json"},
	} {
		got, d := complete(t, cmd, "--format", "")
		if diff := cmp.Diff(want, got); diff != "" || d != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("%s --format: directive %d, candidates (-want +got):\n%s", cmd, d, diff)
		}
	}
}

// TestCompleteRunDirs: the arguments that name runs complete the run
// directories (record.IsRunDir), a real sweep's among them (a copy of the
// package's shared sweep, sweptRun), here and in runs/; directories that
// hold runs are offered to descend into; where there is none, the shell
// completes directories.
func TestCompleteRunDirs(t *testing.T) {
	run := sweptRun(t)
	t.Chdir(t.TempDir())
	if err := copyTree(run, filepath.Join("runs", filepath.Base(run))); err != nil {
		t.Fatal(err)
	}
	swept := runDir(t, "runs")
	for _, d := range []string{"old-run", "archive/2025-run", "not-a-run", ".hidden-run"} {
		os.MkdirAll(d, 0o755)
		if d != "not-a-run" {
			record.WriteRun(d, &record.Run{Name: d, ConfigPath: "m.toml", Config: "name = \"m\"\n", Started: time.Now()})
			os.WriteFile(filepath.Join(d, record.ResultsFile), nil, 0o644)
		}
	}
	holders := cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	for _, tc := range []struct {
		name string
		args []string
		want []string
		d    cobra.ShellCompDirective
	}{
		{"report", []string{"report", ""}, []string{"archive/", "old-run", "runs/", swept}, holders},
		{"report, a prefix", []string{"report", "ru"}, []string{"runs/", swept}, holders},
		{"into a holder", []string{"report", "archive/"}, []string{"archive/2025-run"}, cobra.ShellCompDirectiveNoFileComp},
		{"diff NEW", []string{"diff", "old-run", "o"}, []string{"old-run"}, cobra.ShellCompDirectiveNoFileComp},
		{"diff takes two", []string{"diff", "old-run", swept, ""}, nil, cobra.ShellCompDirectiveNoFileComp},
		{"sweep --resume", []string{"sweep", "--resume", "runs/"}, []string{swept}, cobra.ShellCompDirectiveNoFileComp},
		{"no run: directories", []string{"report", "not"}, nil, cobra.ShellCompDirectiveFilterDirs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, d := complete(t, tc.args...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if d != tc.d {
				t.Errorf("directive %d, want %d", d, tc.d)
			}
		})
	}
}
