package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/reports"
)

// dedupeConfig sweeps the simulated SM120 host's MoE runner with "auto"
// listed last; the sim resolves auto to flashinfer_cutlass and says so in
// /get_server_info, as SGLang does.
func dedupeConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	src := `name = "dedupe"
` + extra + `
[vars]
model = "simulated/Qwen3.5-397B-A17B-NVFP4"
[server]
command = ["{self}", "sim-server", "--model-path", "{model}", "--host", "{host}", "--port", "{port}"]
ready_timeout = "10s"
stop_grace = "1s"
ready_log = "fired up and ready to roll"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_trtllm", "auto"]
[[axis]]
name = "fp4_gemm"
flag = "--fp4-gemm-backend"
values = ["flashinfer_cudnn"]
[[known]]
match = { moe_runner = "flashinfer_cutlass" }
verdict = "nan"
note = "a made-up issue of flashinfer_cutlass, to see auto match it"
`
	path := filepath.Join(dir, "dedupe.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func logNames(t *testing.T, run string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(run, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestDedupe: with dedupe the auto cell runs before flashinfer_cutlass (which
// the config lists first), resolves to it, and flashinfer_cutlass is not
// started: it inherits the auto cell's verdict, marked so. Known issues match
// the auto cell by what it resolved to. Without dedupe every cell starts.
func TestDedupe(t *testing.T) {
	auto, cutlass := "moe_runner=auto,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
	for _, tc := range []struct {
		name  string
		extra string
		flags []string
		logs  int
	}{
		{"flag", "", []string{"--dedupe"}, 2},
		{"config key", "dedupe = true", nil, 2},
		{"off", "", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := dedupeConfig(t, dir, tc.extra)
			code, stdout, stderr := runBMXIn(t, dir, append([]string{"sweep", "-q", "-c", cfg, "--out", "runs"}, tc.flags...)...)
			if code != ExitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			run := runDir(t, filepath.Join(dir, "runs"))
			logs := logNames(t, run)
			if len(logs) != tc.logs {
				t.Errorf("%d servers started (%v), want %d", len(logs), logs, tc.logs)
			}
			rep, err := reports.Load(run)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]reports.Result{}
			for _, r := range rep.Results {
				byID[r.Cell.ID] = r
			}
			a, c := byID[auto], byID[cutlass]
			if a.Cell.Resolved["moe_runner"] != "flashinfer_cutlass" {
				t.Errorf("the auto cell's resolved values: %v (server said %v)", a.Cell.Resolved, a.Resolved)
			}
			if st, k := rep.Status(a); st != reports.XPass || k == nil || k.Match["moe_runner"] != "flashinfer_cutlass" {
				t.Errorf("the auto cell that resolved to flashinfer_cutlass: status %q, known %v", st, k)
			}
			if tc.logs == 3 {
				if c.InheritedFrom != "" || !slices.Contains(logs, cutlass+".log") {
					t.Errorf("without dedupe %s did not run: inherited from %q, logs %v", cutlass, c.InheritedFrom, logs)
				}
				return
			}
			if c.InheritedFrom != auto || c.Verdict != a.Verdict || c.Verdict != "correct" {
				t.Errorf("%s: inherited from %q, verdict %s (auto: %s)", cutlass, c.InheritedFrom, c.Verdict, a.Verdict)
			}
			if want := "inherited from " + auto + " (auto resolved to the same backends): "; !strings.HasPrefix(c.Reason, want) {
				t.Errorf("reason %q, want it to start %q", c.Reason, want)
			}
			if !strings.Contains(c.Repro, "--moe-runner-backend flashinfer_cutlass") {
				t.Errorf("the inherited cell's repro is not its own command: %s", c.Repro)
			}
			if slices.Contains(logs, cutlass+".log") {
				t.Errorf("%s was started: %v", cutlass, logs)
			}
			if byID["moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn"].Verdict != "crash" {
				t.Errorf("the trtllm cell: %+v", byID["moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn"].Verdict)
			}
		})
	}
}
