package main

import (
	"os"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestKnownFromRun is how a team adopts --fail-on unexpected: the first
// gated sweep fails on every failure, bmx report --format known prints a
// [[known]] entry for each (one for the axis value every cell of which
// crashed alike), they go into the config, and the next sweep passes the
// gate. Real bmx processes, on the simulated host.
func TestKnownFromRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	simProfile(t, dir, "before", `[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
behaviour = "crash"
error = "RuntimeError: trtllm-gen MoE kernels are SM100-only"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl", fp4_gemm_backend = "flashinfer_cudnn" }
behaviour = "garbage"
`)
	cfg := profileConfig(t, dir, "adopt", `reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`, []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl"}},
		{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
	}, "")
	out := t.TempDir()
	code, _, stderr := runBMX(t, "sweep", "-c", cfg, "--out", out, "-q", "--fail-on", "unexpected")
	if code != ExitFailed || !strings.Contains(gateMessage(t, stderr), "cells by kind: 3 unexpected") {
		t.Fatalf("no [[known]] entry yet: exit %d, want 1 on the 3 failures\n%s", code, stderr)
	}
	code, known, stderr := runBMX(t, "report", runDir(t, out), "--format", "known")
	if code != ExitOK {
		t.Fatalf("report --format known: exit %d\n%s", code, stderr)
	}
	t.Logf("\n%s", known)
	for _, want := range []string{
		"# moe_runner=flashinfer_trtllm: every one of its 2 cells failed so\n[[known]]\nmatch = { moe_runner = \"flashinfer_trtllm\" }\nverdict = \"crash\"\nnote = \"RuntimeError: trtllm-gen MoE kernels are SM100-only\"\n",
		"[[known]]\nmatch = { moe_runner = \"flashinfer_cutedsl\", fp4_gemm = \"flashinfer_cudnn\" }\nverdict = \"garbage\"\n",
	} {
		if !strings.Contains(known, want) {
			t.Errorf("report --format known lacks:\n%s", want)
		}
	}
	if n := strings.Count(known, "\n[[known]]\n"); n != 2 {
		t.Errorf("%d entries, want 2 (the trtllm value, the cutedsl,cudnn cell)", n)
	}
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n" + known); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out2 := t.TempDir()
	if code, _, stderr := runBMX(t, "sweep", "-c", cfg, "--out", out2, "-q", "--fail-on", "unexpected"); code != ExitOK {
		t.Fatalf("with the entries pasted: exit %d, want 0\n%s", code, stderr)
	}
	if code, known, _ := runBMX(t, "report", runDir(t, out2), "--format", "known"); code != ExitOK || !strings.HasPrefix(known, "# Every failure of the run adopt has a [[known]] entry") {
		t.Errorf("nothing left to add: exit %d\n%s", code, known)
	}
}
