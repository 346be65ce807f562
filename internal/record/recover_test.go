package record

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

func resultLine(t testing.TB, id string) []byte {
	b, err := json.Marshal(Result{Cell: matrix.Cell{ID: id}, Verdict: "correct"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecoverKeepsAWholeLastLine: a complete last line without its newline
// is a finished cell; it must survive the recovery and the next append.
func TestRecoverKeepsAWholeLastLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ResultsFile)
	data := append(append(resultLine(t, "a=1"), '\n'), resultLine(t, "a=2")...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, torn, err := RecoverResults(dir)
	if err != nil || torn || len(got) != 2 {
		t.Fatalf("got %d results, torn %v, err %v", len(got), torn, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(append(resultLine(t, "a=3"), '\n'))
	f.Close()
	got, torn, err = RecoverResults(dir)
	if err != nil || torn || len(got) != 3 {
		t.Fatalf("after an append: %d results, torn %v, err %v", len(got), torn, err)
	}
	// A torn line is cut, and only it.
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(resultLine(t, "a=4")[:20])
	f.Close()
	got, torn, err = RecoverResults(dir)
	after, _ := os.ReadFile(path)
	if err != nil || !torn || len(got) != 3 || !bytes.HasSuffix(after, []byte("\n")) {
		t.Fatalf("torn: %d results, torn %v, err %v", len(got), torn, err)
	}
}

// FuzzReadResults: any bytes in results.jsonl give results or an error,
// never a panic, and whole lines before a bad one are kept.
func FuzzReadResults(f *testing.F) {
	f.Add(append(resultLine(f, "a=1"), '\n'))
	f.Add(append(append(resultLine(f, "a=1"), '\n'), resultLine(f, "a=2")[:10]...))
	f.Add([]byte("{}\n{\"cell\":{\"id\":\"x\"},\"observations\":[{\"name\":\"p\",\"tokens\":0,\"usage\":{\"completion_tokens\":3}}]}\n"))
	f.Add([]byte("\n\n  \nnot json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		results, _, err := ReadResults(bytes.NewReader(data))
		for _, r := range results {
			r.Judge(nil)
		}
		_ = err
	})
}
