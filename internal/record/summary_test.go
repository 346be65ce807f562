package record

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// summaryRun writes a run of cells a=x, a=y with the verdicts given, as
// this bmx records them.
func summaryRun(t *testing.T, dir string, x, y classify.Verdict) {
	t.Helper()
	run := &Run{Name: "s", Reference: "a=x", Axes: []AxisValues{{Name: "a", Values: []string{"x", "y"}}}}
	if err := WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	for _, c := range []struct {
		v string
		w classify.Verdict
	}{{"x", x}, {"y", y}} {
		rs = append(rs, Result{Cell: matrix.Cell{ID: "a=" + c.v, Values: []matrix.AxisValue{{Axis: "a", Value: c.v}}}, Verdict: c.w,
			Reason: "because", Classifier: classify.Fingerprint(), LogTail: "log of " + c.v + "\n",
			Observations: []evidence.Observation{{Probe: "p", Text: "t"}}})
	}
	if err := WriteResults(filepath.Join(dir, ResultsFile), rs); err != nil {
		t.Fatal(err)
	}
}

// TestSummaryCurrent: a summary is read back while its run is unchanged,
// and made again when results.jsonl changed, even to the same size and
// modification time within the file system's clock tick (its checksum);
// a summary that cannot be written leaves the run read in full, alike.
func TestSummaryCurrent(t *testing.T) {
	dir := t.TempDir()
	summaryRun(t, dir, classify.Correct, classify.Crash)
	s, err := LoadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.rep != nil || s.Cells[1].Verdict != classify.Crash {
		t.Fatalf("summary: kept the report %v, a=y %s", s.rep != nil, s.Cells[1].Verdict)
	}
	r, err := s.Result(1)
	if err != nil || r.LogTail != "log of y\n" || r.Reason != "because" {
		t.Fatalf("a=y's result read back: %+v, %v", r, err)
	}
	made, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
	if again, err := LoadSummary(dir); err != nil || again.Cells[1].Verdict != classify.Crash {
		t.Fatalf("read back: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SummaryFile)); !bytes.Equal(b, made) {
		t.Error("a current summary was made again")
	}

	// Another verdict of the same length, the same size and time.
	path := filepath.Join(dir, ResultsFile)
	fi, _ := os.Stat(path)
	data, _ := os.ReadFile(path)
	changed := bytes.Replace(data, []byte(`"verdict":"crash"`), []byte(`"verdict":"wrong"`), 1)
	if bytes.Equal(changed, data) || len(changed) != len(data) {
		t.Fatal("no same-size change made")
	}
	os.WriteFile(path, changed, 0o600)
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	s, err = LoadSummary(dir)
	if err != nil || s.Cells[1].Verdict != classify.Wrong {
		t.Errorf("after a same-size change in the same tick: a=y %s, %v", s.Cells[1].Verdict, err)
	}

	// A summary that cannot be written (a folder in its place, as a
	// read-only run directory refuses it): the same view, read in full.
	ro := t.TempDir()
	summaryRun(t, ro, classify.Correct, classify.Garbage)
	os.Mkdir(filepath.Join(ro, SummaryFile), 0o755)
	s, err = LoadSummary(ro)
	if err != nil || s.Cells[1].Verdict != classify.Garbage || s.rep != nil || s.details == nil {
		t.Fatalf("run without a summary: %v (kept the report %v, details %v)", err, s.rep != nil, s.details != nil)
	}
	if r, err := s.Result(1); err != nil || r.LogTail != "log of y\n" {
		t.Errorf("read-only run's a=y: %+v, %v", r, err)
	}
}
