package reports

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// knownRunDir holds the recorded run TestKnownFromRun reads: a sweep of the
// config knownConfig writes, gated on unexpected failures with no
// [[known]] entry yet (knownRun makes it with -update).
var knownRunDir = filepath.Join("testdata", "known")

// knownConfig writes, into dir, the config "adopt" of the simulated host
// and its profile: the trtllm MoE runner crashes in both its cells, the
// cutedsl runner with the cudnn GEMM answers garbage. It returns the
// config's text.
func knownConfig(t *testing.T, dir string) string {
	t.Helper()
	matrixtest.Profile{Name: "before", Startup: "50ms", Body: `[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
behaviour = "crash"
error = "RuntimeError: trtllm-gen MoE kernels are SM100-only"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl", fp4_gemm_backend = "flashinfer_cudnn" }
behaviour = "garbage"
`}.Write(t, filepath.Join(dir, "before.toml"))
	return matrixtest.Config{Name: "adopt", Head: `reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`,
		Vars:   map[string]string{"profile": "before"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/{profile}.toml"}, ReadyTimeout: "30s"},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		},
	}.String()
}

// knownRun builds bmx and sweeps the config knownConfig writes with
// --fail-on unexpected (exit 1: no [[known]] entry yet), recording the run
// directory under out, replacing what was there, without the files a
// reader makes of it (reports, summary) and with each log's end.
func knownRun(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	cfg := filepath.Join(work, "adopt.toml")
	if err := os.WriteFile(cfg, []byte(knownConfig(t, work)), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(work, "runs")
	cmd := exec.Command(bmx, "sweep", "-c", cfg, "--out", runs, "-q", "--fail-on", "unexpected")
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("sweep: %v, want exit 1 (3 unexpected failures)\n%s", err, b)
	}
	dirs, _ := filepath.Glob(filepath.Join(runs, "*"))
	if len(dirs) != 1 {
		t.Fatalf("%d run directories under %s, want 1", len(dirs), runs)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	recordRunDir(t, dirs[0], out)
}

// TestKnownFromRun is how a team adopts --fail-on unexpected, on the
// recorded first gated sweep (testdata/known; go test ./internal/reports
// -run TestKnownFromRun -update sweeps it again and rewrites the golden
// file): the gate fails on every failure, KnownTOML (bmx report --format
// known) writes a [[known]] entry for each (one for the axis value every
// cell of which crashed alike), and with those entries in the config the
// same cells pass the gate and nothing is left to add.
func TestKnownFromRun(t *testing.T) {
	t.Parallel()
	if *update {
		knownRun(t, knownRunDir)
	}
	dir := t.TempDir()
	// A copy: loading a run may write beside it.
	if err := os.CopyFS(dir, os.DirFS(knownRunDir)); err != nil {
		t.Fatal(err)
	}
	rep, err := record.Load(dir)
	if err != nil {
		t.Fatalf("%v (go test ./internal/reports -run TestKnownFromRun -update makes the run)", err)
	}
	g, err := Gate(rep, []string{GateUnexpected}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msg := strings.Join(g.Summary(SummaryOptions{}), "\n"); !g.Failed() || !strings.Contains(msg, "cells by kind: 3 unexpected") {
		t.Fatalf("no [[known]] entry yet: want the gate to fail on the 3 failures:\n%s", msg)
	}
	var b bytes.Buffer
	if err := KnownTOML(&b, rep); err != nil {
		t.Fatal(err)
	}
	known := b.String()
	golden(t, b.Bytes())
	for _, want := range []string{
		"# moe_runner=flashinfer_trtllm: every one of its 2 cells failed so\n[[known]]\nmatch = { moe_runner = \"flashinfer_trtllm\" }\nverdict = \"crash\"\nnote = \"RuntimeError: trtllm-gen MoE kernels are SM100-only\"\n",
		"[[known]]\nmatch = { moe_runner = \"flashinfer_cutedsl\", fp4_gemm = \"flashinfer_cudnn\" }\nverdict = \"garbage\"\n",
	} {
		if !strings.Contains(known, want) {
			t.Errorf("KnownTOML lacks:\n%s", want)
		}
	}
	if n := strings.Count(known, "\n[[known]]\n"); n != 2 {
		t.Errorf("%d entries, want 2 (the trtllm value, the cutedsl,cudnn cell)", n)
	}

	// The entries pasted into the config, as the team does: the config
	// parses, and its [[known]] entries cover every failure of the run.
	cfg, err := matrix.Parse("adopt.toml", []byte(knownConfig(t, t.TempDir())+"\n"+known), nil)
	if err != nil {
		t.Fatalf("the config with the entries pasted: %v", err)
	}
	if len(cfg.Known) != 2 {
		t.Fatalf("%d [[known]] entries parsed, want 2", len(cfg.Known))
	}
	rep.Run.Known = cfg.Known
	if g, err := Gate(rep, []string{GateUnexpected}, nil); err != nil || g.Failed() {
		t.Errorf("with the entries pasted: the gate fails (%v):\n%s", err, strings.Join(g.Summary(SummaryOptions{}), "\n"))
	}
	b.Reset()
	if err := KnownTOML(&b, rep); err != nil || !strings.HasPrefix(b.String(), "# Every failure of the run adopt has a [[known]] entry") {
		t.Errorf("nothing left to add: %v\n%s", err, &b)
	}
}
