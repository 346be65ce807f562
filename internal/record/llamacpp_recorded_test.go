package record_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/llamacpptest"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// llamacppRunDir holds the recorded sweep of the llama.cpp example
// (examples/llamacpp/matrix.toml, 20 cells, on the real engine: llama.cpp
// on CPU through node-llama-cpp, with the real model stories260K.gguf),
// made by llamacppRecord under -update; README.md beside it says so.
var llamacppRunDir = filepath.Join("testdata", "llamacpp")

// llamacppRecord sweeps the llama.cpp example as shipped, with 2 slots,
// through a real bmx, and records the run under llamacppRunDir. It needs
// node, the example's node_modules and the model (testenv skips, or fails
// in CI, without them).
func llamacppRecord(t *testing.T) {
	t.Helper()
	example, model := llamacpptest.Ready(t)
	bmx := matrixtest.BuildBMX(t)
	out := t.TempDir()
	run, _ := matrixtest.SweepRun(t, bmx, out, "-q", "-c", filepath.Join(example, "matrix.toml"), "--var", "model="+model, "--slots", "2", "--out", out)
	rerecord(t, run, llamacppRunDir)
}

// TestLlamaCppRecorded judges the recorded sweep of a real inference
// engine (llama.cpp on CPU through node-llama-cpp, a real trained model)
// again, and checks each verdict against what the engine really does. It
// is also the calibration of the degraded threshold: every cell that
// answers is compared with the f16 reference by its greedy top-5 logprobs,
// and the healthy cache types (f32, f16, bf16, flash attention on or off)
// must sit far below classify.DegradedKL while the quantized-K cells that
// produce garbage sit above it. Judged again with a garbage cell (a q8_0 K
// cache without flash attention) configured as the reference: the healthy
// cells must still be correct, the agreeing cells are the yardstick, and
// the agreement says the reference failed. cmd/bmx's TestLlamaCppSweep
// sweeps a part of the example live; go test ./internal/record -run
// TestLlamaCppRecorded -update records this run again.
func TestLlamaCppRecorded(t *testing.T) {
	t.Parallel()
	if *update {
		llamacppRecord(t)
	}
	run := recordedRun(t, llamacppRunDir, "go test ./internal/record -run TestLlamaCppRecorded -update")
	const shipped = "flash_attn=off,cache_k=f16,cache_v=f16"
	t.Run("as shipped", func(t *testing.T) {
		rep := loadJudged(t, run)
		if len(rep.Results) != 20 {
			t.Fatalf("%d cells, want 20", len(rep.Results))
		}
		if a := rep.Agreement; rep.Run.Reference != shipped || a == nil || a.Yardstick != shipped || a.Status != classify.RefConfirmed {
			t.Errorf("reference %q, agreement %+v: want the shipped reference, vouched for", rep.Run.Reference, a)
		}
		llamacpptest.CheckCells(t, rep.Results, shipped)
	})
	// The same engine outputs, with the garbage cell named as the
	// reference in run.json: read as bmx report --rejudge reads it (Load),
	// and judged again against it from the recorded evidence (Rejudge, as
	// a sweep so configured judges), the real outputs are judged against a
	// real garbage reference without sweeping the engine a second time.
	t.Run("garbage reference", func(t *testing.T) {
		const garbage = "flash_attn=off,cache_k=q8_0,cache_v=f16"
		dir := filepath.Join(t.TempDir(), filepath.Base(run))
		if err := os.CopyFS(dir, os.DirFS(run)); err != nil {
			t.Fatal(err)
		}
		setReference(t, dir, garbage)
		read, err := record.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for how, rep := range map[string]*record.Report{"read": read, "judged again": loadJudged(t, dir)} {
			t.Run(how, func(t *testing.T) {
				a := rep.Agreement
				if rep.Run.Reference != garbage || a == nil || a.Status != classify.RefBroken || a.Yardstick == garbage || a.Yardstick == "" {
					t.Fatalf("reference %q, agreement %+v: want the garbage reference replaced by the agreeing cells", rep.Run.Reference, a)
				}
				if !strings.Contains(a.Note, "failed, so it is no yardstick") {
					t.Errorf("the agreement does not say the reference failed: %s", a.Note)
				}
				llamacpptest.CheckCells(t, rep.Results, a.Yardstick)
			})
		}
	})
}

// setReference names ref as the reference in the run directory dir's
// run.json, keeping the rest of it as it is.
func setReference(t *testing.T, dir, ref string) {
	t.Helper()
	path := filepath.Join(dir, "run.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	meta["reference"] = ref
	if b, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
