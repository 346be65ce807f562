package classify

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
)

// corpusPath is the shared evidence corpus beside the checkout.
var corpusPath = filepath.Join("..", "..", "shared", "corpus", "dev.jsonl")

func loadCorpus(t *testing.T) []*Case {
	t.Helper()
	f, err := os.Open(corpusPath)
	if os.IsNotExist(err) {
		t.Skipf("corpus not found at %s (it lives in ../shared beside the checkout)", corpusPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []*Case
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		c, err := ParseCase(sc.Bytes())
		if err != nil {
			t.Fatalf("%s:%d: %v", corpusPath, n, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s holds no cases", corpusPath)
	}
	return cases
}

// TestCorpus judges every labelled real-world case and expects its label.
func TestCorpus(t *testing.T) {
	for _, c := range loadCorpus(t) {
		t.Run(c.ID, func(t *testing.T) {
			j := Cell(c.Input())
			if j.Verdict != c.Label {
				t.Errorf("verdict %s, want %s (%s)\nreason: %s\nsignature: %s\nnote: %s", j.Verdict, c.Label, c.Source, j.Reason, j.Signature, c.Note)
			}
			if (j.Verdict == Crash || j.Verdict == NaN) && j.Signature == "" {
				t.Errorf("%s without a signature", j.Verdict)
			}
		})
	}
}
