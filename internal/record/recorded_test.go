package record_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// update sweeps again, with a real bmx, the runs recorded under testdata/
// (the llama.cpp example's and the agreement grids') and rewrites them,
// instead of reading the committed ones: go test ./internal/record -run
// 'TestLlamaCppRecorded|TestAgreementRecorded' -update.
var update = flag.Bool("update", false, "sweep again with a real bmx and rewrite the recorded runs under testdata/")

// loadJudged reads a recorded run directory and judges every cell again
// with this bmx's classifier (Rejudge: against the configured reference,
// then the agreement among cells), so what is checked is what this bmx
// makes of the recorded evidence, not the verdicts stored with it.
func loadJudged(t *testing.T, dir string) *record.Report {
	t.Helper()
	rep, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep.Rejudge()
	return rep
}

// recordedRun is the one run directory under dir, or fails t saying how
// to record it.
func recordedRun(t *testing.T, dir, how string) string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(dir, "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("%d recorded runs under %s, want 1 (%s makes it)", len(runs), dir, how)
	}
	return filepath.Dir(runs[0])
}

// rerecord replaces what dir holds by the run directory run, as
// matrixtest.RecordRun keeps it (no reports or summaries, each log's end).
func rerecord(t *testing.T, run, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := matrixtest.RecordRun(run, filepath.Join(dir, filepath.Base(run))); err != nil {
		t.Fatal(err)
	}
}
