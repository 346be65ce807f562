package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/record"
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
			rep, err := record.Load(run)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]record.Result{}
			for _, r := range rep.Results {
				byID[r.Cell.ID] = r
			}
			a, c := byID[auto], byID[cutlass]
			if a.Cell.Resolved["moe_runner"] != "flashinfer_cutlass" {
				t.Errorf("the auto cell's resolved values: %v (server said %v)", a.Cell.Resolved, a.Resolved)
			}
			if st, k := reports.Status(rep, a); st != reports.XPass || k == nil || k.Match["moe_runner"] != "flashinfer_cutlass" {
				t.Errorf("the auto cell that resolved to flashinfer_cutlass: status %q, known %v", st, k)
			}
			if rep.Run.Dedupe != (tc.logs == 2) {
				t.Errorf("run.json says dedupe %v", rep.Run.Dedupe)
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

// TestDedupeResume: a run started with --dedupe keeps deduping when
// resumed without the flag (run.json records it). The cutlass cell's
// result is taken out of results.jsonl, as a run cut short would lack it;
// the resume gives it the auto cell's verdict again rather than start it.
func TestDedupeResume(t *testing.T) {
	dir := t.TempDir()
	cfg := dedupeConfig(t, dir, "")
	if code, _, stderr := runBMXIn(t, dir, "sweep", "-q", "-c", cfg, "--out", "runs", "--dedupe"); code != ExitOK {
		t.Fatalf("sweep: exit %d\n%s", code, stderr)
	}
	run := runDir(t, filepath.Join(dir, "runs"))
	results := filepath.Join(run, record.ResultsFile)
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(l, `"id":"moe_runner=flashinfer_cutlass,`) {
			kept = append(kept, l)
		}
	}
	if len(kept) != 2+1 { // two lines and the empty tail
		t.Fatalf("results.jsonl: %d lines kept of %q", len(kept), b)
	}
	if err := os.WriteFile(results, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runBMXIn(t, dir, "sweep", "-q", "--resume", run); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	rep, err := record.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Cell.ID, "moe_runner=flashinfer_cutlass,") {
			found = true
			if r.InheritedFrom != "moe_runner=auto,fp4_gemm=flashinfer_cudnn" {
				t.Errorf("after the resume %s inherited from %q", r.Cell.ID, r.InheritedFrom)
			}
		}
	}
	if logs := logNames(t, run); !found || len(logs) != 2 || !rep.Run.Dedupe {
		t.Errorf("cutlass cell found %v, servers started %v, dedupe %v", found, logs, rep.Run.Dedupe)
	}
}
