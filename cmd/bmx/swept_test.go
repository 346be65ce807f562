package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// The package's shared sim sweep (sweptRun) and the config it sweeps
// (twoCells), for the tests of every platform.

// twoCells is a sim config of two cells, one correct and one that crashes
// at start (trtllm is SM100-only in the sim's profile), on the SM120
// profile's faster clock (a start-up of 50 ms, not 700). Its cells ask the
// smoke set and the performance probe.
func twoCells(t *testing.T, name string) string {
	t.Helper()
	return twoCellsIn(t, t.TempDir(), name, "")
}

// sayOK is one short probe, as a probe file's [[probe]] table.
const sayOK = `[[probe]]
name = "say-ok"
prompt = "Say 'OK'"
max_tokens = 8
expect = { contains = "OK" }
`

// oneProbe is a probe file of one short probe and no performance probe,
// for the tests whose cells need only be correct or crash.
const oneProbe = sayOK + `
[perf]
enabled = false
`

// oneProbeSmallPerf is oneProbe with a small performance probe (2
// requests of 16 tokens, alone): for the tests that read the run's
// performance section too.
const oneProbeSmallPerf = sayOK + `
[perf]
output_tokens = 16
concurrency = 1
requests = 2
`

// twoCellsIn is twoCells written into dir, with its profile; with probes
// not "", its cells ask the probe file of that text (dir/probes.toml)
// instead.
func twoCellsIn(t *testing.T, dir, name, probes string) string {
	t.Helper()
	prof := matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	tail := ""
	if probes != "" {
		matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), probes)
		tail = "[probes]\nfile = \"probes.toml\"\n"
	}
	return matrixtest.Config{Name: name,
		Server: matrixtest.Server{Command: matrixtest.Sim("--reasoning-parser", "qwen3", "--sim-profile", prof), ReadyLog: "fired up and ready to roll"},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn"}},
		},
		Tail: tail,
	}.Write(t, filepath.Join(dir, "m.toml"))
}

// sweptRun returns a copy, in a folder of t's own, of a finished sweep of
// twoCells asking oneProbe (its config and profile stay where the sweep
// had them, for a resume): its users read which cells ran, not what they
// answered.
func sweptRun(t *testing.T) string {
	t.Helper()
	sweptOnce.once.Do(func() {
		root, err := os.MkdirTemp("", "bmx-swept-")
		if err != nil {
			sweptOnce.fail = err.Error()
			return
		}
		sweptOnce.root = root
		out := filepath.Join(root, "runs")
		sweptOnce.code, _, sweptOnce.stderr = runBMX(t, "sweep", "-c", twoCellsIn(t, root, "links", oneProbe), "--out", out, "-q")
		if dirs, _ := filepath.Glob(filepath.Join(out, "*")); len(dirs) == 1 {
			sweptOnce.run = dirs[0]
		}
	})
	if sweptOnce.fail != "" || sweptOnce.code != ExitOK || sweptOnce.run == "" {
		t.Fatalf("sweep: %s exit %d\n%s", sweptOnce.fail, sweptOnce.code, sweptOnce.stderr)
	}
	dir := filepath.Join(t.TempDir(), "runs", filepath.Base(sweptOnce.run))
	if err := copyTree(sweptOnce.run, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyTree copies the directory src to dst, its files' modes kept.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm())
	})
}

// readResults reads a run's results.jsonl.
func readResults(t *testing.T, dir string) []record.Result {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, _, err := record.ReadResults(f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
