package record

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeResult reads result lines as decodeResult does (observations
// without their UnmarshalJSON) and as encoding/json does through it, and
// expects the same results: the sim sweep's lines of the scale benchmark,
// and observations that give their token count as recorded cases do.
func TestDecodeResult(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "reports", "testdata", "bench", "sim-results.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil || len(lines) == 0 {
		t.Fatalf("%d lines, %v", len(lines), err)
	}
	lines = append(lines,
		`{"cell":{"id":"a=1"},"verdict":"correct","observations":[{"name":"p","text":"OK","completion_tokens":3},{"name":"q","usage":{"completion_tokens":0}},{"name":"r","tokens":2,"usage":{"completion_tokens":9}}]}`,
		`{"cell":{"id":"a=2"},"verdict":"crash","observations":[]}`,
		`{"cell":{"id":"a=3"},"verdict":"crash","observations":null}`,
		`{"cell":{"id":"a=4"},"verdict":"crash"}`)
	// ReadResults shares prompts and tokens among the lines it reads: the
	// same results, read twice over.
	twice := strings.Join(append(slices.Clone(lines), lines...), "\n") + "\n"
	read, torn, err := ReadResults(strings.NewReader(twice))
	if err != nil || torn || len(read) != 2*len(lines) {
		t.Fatalf("ReadResults: %d results, torn %v, %v", len(read), torn, err)
	}
	for i, line := range lines {
		var want Result
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		for _, got := range []Result{read[i], read[len(lines)+i]} {
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("line %d: ReadResults differs (-json +ReadResults):\n%s", i+1, d)
			}
		}
	}
	for i, line := range lines {
		var want Result
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeResult([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" || (want.Observations == nil) != (got.Observations == nil) {
			t.Errorf("line %d: decodeResult differs (-json +decodeResult):\n%s", i+1, d)
		}
	}
	if _, err := decodeResult([]byte(`{"cell":{"id":"a"},"observations":[{"name":1}]}`)); err == nil {
		t.Error("a bad observation decoded")
	}
}
