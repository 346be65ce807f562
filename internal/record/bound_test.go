package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// hugeResult is a valid result whose line is far past MaxLine: a 20 MB
// answer of quotes, escapes and multi-byte runes, 50,000 logprob steps and
// a 20 MB log tail.
func hugeResult(id string) Result {
	// One allocation, not a builder's doublings: the test is CPU-bound.
	const piece = "garbage \"quoted\"\n\ttab é ü 中文 \u2028 \\ end "
	text := strings.Repeat(piece, (20<<20+len(piece)-1)/len(piece))
	steps := make([]evidence.Step, 50000)
	for i := range steps {
		steps[i] = evidence.Step{Token: "tok", Logprob: -0.5, Top: []evidence.Alt{{Token: "a", Logprob: -1}, {Token: "b", Logprob: -2}}}
	}
	return Result{Cell: matrix.Cell{ID: id, Values: []matrix.AxisValue{{Axis: "a", Value: strings.TrimPrefix(id, "a=")}}}, Verdict: "garbage",
		Observations: []evidence.Observation{{Probe: "p", Text: text, Logprobs: &evidence.Logprobs{Steps: steps}}},
		LogTail:      strings.Repeat("Traceback (most recent call last):\n", 20<<20/35)}
}

// TestReadCutLine: a run whose results.jsonl holds a valid line of 42 MB
// is read with that line cut, bounded (its answer and log tail to their
// first KeepHead bytes with a marker, its steps to MaxSteps) and the
// result saying so, and the cells around it read whole; a resume cuts a
// torn huge last line off the file without reading the file whole.
func TestReadCutLine(t *testing.T) {
	dir := t.TempDir()
	run := &Run{Name: "huge", Axes: []AxisValues{{Name: "a", Values: []string{"x", "y", "z"}}}}
	if err := WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	small := func(id string) Result {
		return Result{Cell: matrix.Cell{ID: id, Values: []matrix.AxisValue{{Axis: "a", Value: strings.TrimPrefix(id, "a=")}}}, Verdict: "correct",
			Reason: "fine", Observations: []evidence.Observation{{Probe: "p", Text: "323"}}}
	}
	huge := hugeResult("a=y")
	if err := WriteResults(filepath.Join(dir, ResultsFile), []Result{small("a=x"), huge, small("a=z")}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, ResultsFile)); fi.Size() < 40<<20 {
		t.Fatalf("results.jsonl is %d bytes, want a line past 40 MB", fi.Size())
	}
	rep, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want 3", len(rep.Results))
	}
	y := rep.Result("a=y")
	o := y.Observations[0]
	limit := evidence.KeepHead + 200
	if len(o.Text) > limit || !strings.Contains(o.Text, "[bmx cut ") || !strings.HasPrefix(huge.Observations[0].Text, strings.SplitN(o.Text, " … [bmx cut", 2)[0]) {
		t.Errorf("the answer read: %d bytes, %.100q...%q", len(o.Text), o.Text, o.Text[max(0, len(o.Text)-120):])
	}
	if len(y.LogTail) > limit || !strings.HasPrefix(y.LogTail, "Traceback (most recent call last):\n") {
		t.Errorf("the log tail read: %d bytes", len(y.LogTail))
	}
	if o.Logprobs == nil || len(o.Logprobs.Steps) != evidence.MaxSteps || o.Logprobs.Steps[0].Top[1].Token != "b" {
		t.Errorf("the steps read: %+v", o.Logprobs)
	}
	if len(y.Problems) != 1 || !strings.Contains(y.Problems[0], "read it cut") {
		t.Errorf("the result does not say it was read cut: %q", y.Problems)
	}
	for _, id := range []string{"a=x", "a=z"} {
		if r := rep.Result(id); r.Observations[0].Text != "323" || len(r.Problems) != 0 {
			t.Errorf("%s read as %+v", id, r)
		}
	}

	// A torn last line, itself huge: cut off, the rest kept.
	f, err := os.OpenFile(filepath.Join(dir, ResultsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The huge line of a=y, as a=q's: the same bytes as marshalling
	// hugeResult("a=q") (checked once), without marshalling 40 MB again.
	written, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Split(written, []byte("\n"))[1]
	line = bytes.Replace(line, []byte(`"id":"a=y"`), []byte(`"id":"a=q"`), 1)
	line = bytes.Replace(line, []byte(`"value":"y"`), []byte(`"value":"q"`), 1)
	f.Write(line[:len(line)-100])
	f.Close()
	results, torn, err := RecoverResults(dir)
	if err != nil || !torn || len(results) != 3 {
		t.Fatalf("recover: %d results, torn %v, %v", len(results), torn, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, ResultsFile))
	if !bytes.HasSuffix(data, []byte("}\n")) || bytes.Count(data, []byte("\n")) != 3 {
		t.Errorf("the torn line was not cut off: %d bytes, ends %q", len(data), data[max(0, len(data)-20):])
	}
}

// TestLineCutter: what lineCutter keeps of any JSON is valid JSON, its
// strings the head of the original's (cut on a rune and escape boundary)
// and its arrays the first MaxLineItems items.
// cutterLine is json.Marshal of {"text": text, "items": [{"i": 0, "s":
// "x]\"["}, ... items of them], "after": [1, 2]}, keys sorted as Marshal
// sorts them; the items, which need no escapes but the quote's, are written
// out rather than made as maps and encoded.
func cutterLine(text string, items int) []byte {
	quoted, _ := json.Marshal(text)
	b := make([]byte, 0, 32+items*24+len(quoted))
	b = append(b, `{"after":[1,2],"items":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"i":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"s":"x]\"["}`...)
	}
	b = append(b, `],"text":`...)
	b = append(b, quoted...)
	return append(b, '}')
}

func TestLineCutter(t *testing.T) {
	pieces := []string{"a", "é", "中", "\"", "\\", "\n", "\u2028", "\x01", "😀", " "}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		var s strings.Builder
		for s.Len() < evidence.KeepHead+n*97 {
			s.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := cutterLine(s.String(), MaxLineItems+n)
		var c lineCutter
		c.write(in)
		var got struct {
			Text  string           `json:"text"`
			Items []map[string]any `json:"items"`
			After []int            `json:"after"`
		}
		if err := json.Unmarshal(c.out.Bytes(), &got); err != nil {
			t.Fatalf("case %d: %v\n%.300q", n, err, c.out.String())
		}
		head, _, cut := strings.Cut(got.Text, " … [bmx cut ")
		if !strings.HasPrefix(s.String(), head) || cut != (s.Len() > evidence.KeepHead) && len(head) < evidence.KeepHead-8 {
			t.Errorf("case %d: kept %d bytes of %d, cut %v", n, len(head), s.Len(), cut)
		}
		if len(got.Items) != MaxLineItems || got.Items[MaxLineItems-1]["i"] != float64(MaxLineItems-1) || len(got.After) != 2 {
			t.Errorf("case %d: %d items, after %v", n, len(got.Items), got.After)
		}
	}
	// A line under MaxLine is read as it is.
	br := bufio.NewReaderSize(strings.NewReader("{\"a\":1}\n{\"b\""), 16)
	if line, full, err := readLine(br); string(line) != "{\"a\":1}\n" || full != 0 || err != nil {
		t.Errorf("readLine: %q %d %v", line, full, err)
	}
}
