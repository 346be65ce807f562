package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// storedResults are three finished cells as a sweep records them: a
// correct one with its observation, a NaN and a crash with signatures.
func storedResults() []Result {
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	res := func(fp4 string, v classify.Verdict, sig string) Result {
		c := matrix.Cell{ID: "moe=cutlass,fp4=" + fp4, Values: []matrix.AxisValue{{Axis: "moe", Value: "cutlass"}, {Axis: "fp4", Value: fp4}}}
		return Result{
			Cell: c, Verdict: v, Signature: sig, Reason: string(v),
			Probes:       []classify.ProbeVerdict{{Name: "say-ok", Verdict: v}},
			Observations: []evidence.Observation{{Probe: "say-ok", Text: "OK", HTTPStatus: 200}},
			LogPath:      "logs/" + c.ID + ".log", Timings: Timings{ReadyMS: 40000, TotalMS: 40500},
			Started: t0, Ended: t0.Add(time.Second),
		}
	}
	return []Result{
		res("cudnn", classify.Correct, ""),
		res("cutlass", classify.NaN, "probability tensor contains either `inf`, `nan` or element < 0"),
		res("trtllm", classify.Crash, "CUDA error: no kernel image is available for execution on the device"),
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range storedResults() {
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := filepath.Join(dir, ResultsFile)
	// A torn last line, as a kill -9 during a write leaves it.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"cell":{"id":"moe=trt`)
	f.Close()
	f, _ = os.Open(path)
	defer f.Close()
	got, torn, err := ReadResults(f)
	if err != nil || !torn || len(got) != 3 || got[2].Verdict != classify.Crash {
		t.Fatalf("got %d results, torn %v, err %v", len(got), torn, err)
	}

	bad := strings.NewReader("{\"verdict\":\"correct\"}\nnot json\n{}\n")
	if _, _, err := ReadResults(bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad middle line should be an error naming it: %v", err)
	}
}

// TestReadResultsInOrder: a long file (many more lines than decoders) reads
// back in file order, blank lines skipped, and a bad line deep in it is an
// error naming its number with every result before it returned in order;
// a reader that fails midway is an error too.
func TestReadResultsInOrder(t *testing.T) {
	var b strings.Builder
	const n = 500
	for i := range n {
		r := storedResults()[i%3]
		r.Cell.ID = fmt.Sprintf("cell-%03d", i)
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteString("\n")
		if i%50 == 0 {
			b.WriteString("\n")
		}
	}
	got, torn, err := ReadResults(strings.NewReader(b.String()))
	if err != nil || torn || len(got) != n {
		t.Fatalf("%d results, torn %v, err %v; want %d", len(got), torn, err, n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("cell-%03d", i); r.Cell.ID != want || r.Verdict != storedResults()[i%3].Verdict {
			t.Fatalf("result %d is %s (%s), want %s", i, r.Cell.ID, r.Verdict, want)
		}
	}

	// Written back whole, they read back in the same order.
	path := filepath.Join(t.TempDir(), ResultsFile)
	if err := WriteResults(path, got); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := ReadResults(f)
	f.Close()
	if err != nil || len(again) != n {
		t.Fatalf("written back: %d results, err %v", len(again), err)
	}
	for i := range again {
		if again[i].Cell.ID != got[i].Cell.ID {
			t.Fatalf("written back, result %d is %s, want %s", i, again[i].Cell.ID, got[i].Cell.ID)
		}
	}

	lines := strings.SplitAfter(b.String(), "\n")
	bad := strings.Join(lines[:300], "") + "{\"cell\": oops}\n" + strings.Join(lines[300:], "")
	got, _, err = ReadResults(strings.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "line 301:") {
		t.Fatalf("a bad line 301: err %v", err)
	}
	if len(got) != 300-6 || got[len(got)-1].Cell.ID != fmt.Sprintf("cell-%03d", len(got)-1) {
		t.Errorf("before the bad line: %d results, the last %s", len(got), got[len(got)-1].Cell.ID)
	}

	failing := io.MultiReader(strings.NewReader(strings.Join(lines[:100], "")), iotest.ErrReader(errors.New("disk gone")))
	if _, _, err := ReadResults(failing); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("a failing reader: err %v", err)
	}
}
