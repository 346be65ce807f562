package classify

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// bigLogCase streams one case whose log is about size bytes of harmless
// lines with a CUDA error at the end, then a second, small case.
func bigLogCase(size int) io.Reader {
	line := `INFO 03-14 09:12:01 scheduler.py:99] Decode batch. #running-req: 16, gen throughput (token/s): 5012.3 \"ok\" \u00e9\n`
	head := strings.NewReader(`{"id":"big","label":"crash","exit":{"code":1,"signal":""},"probes":[],"log":"`)
	body := io.LimitReader(&repeater{s: line}, int64(size))
	tail := strings.NewReader(`RuntimeError: CUDA error: an illegal memory access was encountered"}` + "\n" +
		`{"id":"small","label":"correct","log":"","exit":null,"probes":[{"name":"p","prompt":"Say 'OK'","expect":{"contains":"OK"},"text":"OK","http_status":200}]}` + "\n")
	return io.MultiReader(head, body, tail)
}

type repeater struct {
	s string
	i int
}

func (r *repeater) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.i:])
		n += c
		r.i = (r.i + c) % len(r.s)
	}
	return n, nil
}

func TestCaseReaderBigLog(t *testing.T) {
	cr := NewCaseReader(bigLogCase(100 << 20))
	c, err := cr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Log) > CaseStringHead+CaseStringTail+16 {
		t.Errorf("kept %d bytes of the log", len(c.Log))
	}
	j := Cell(c.Input())
	if j.Verdict != Crash || j.Signature != "CUDA error: an illegal memory access was encountered" {
		t.Errorf("got %s %q", j.Verdict, j.Signature)
	}
	c, err = cr.Next()
	if err != nil || c.ID != "small" || Cell(c.Input()).Verdict != Correct {
		t.Fatalf("the case after the big one: %+v %v", c, err)
	}
	if _, err := cr.Next(); err != io.EOF {
		t.Errorf("after the last case: %v, want EOF", err)
	}
}

func TestCaseReaderCutsAtSafeBoundaries(t *testing.T) {
	for _, unit := range []string{`\n`, `\"`, `\\`, `\u00e9`, "é", "猫", `a\tb`} {
		s := strings.Repeat(unit, (CaseStringHead+CaseStringTail)/len(unit)+1000)
		line, _ := json.Marshal(map[string]string{"id": "x", "log": "start" + strings.Repeat("x", 3) + s + "end"})
		var raw bytes.Buffer
		raw.Write(line)
		raw.WriteByte('\n')
		// The marshalled line escapes differently; feed the unit raw too.
		raw.WriteString(`{"id":"y","log":"` + s + `end"}` + "\n")
		cr := NewCaseReader(&raw)
		for range 2 {
			c, err := cr.Next()
			if err != nil {
				t.Fatalf("unit %q: %v", unit, err)
			}
			if !strings.HasSuffix(c.Log, "end") || strings.ContainsRune(c.Log, '\uFFFD') {
				t.Errorf("unit %q: cut badly (%d bytes, ends %q)", unit, len(c.Log), c.Log[max(len(c.Log)-8, 0):])
			}
		}
	}
}

func TestCaseReaderBadLines(t *testing.T) {
	cr := NewCaseReader(strings.NewReader("not json\n\n{\"id\":\"ok\",\"log\":\"\"}\n"))
	if _, err := cr.Next(); err == nil || cr.Line() != 1 {
		t.Errorf("line 1: err %v at line %d", err, cr.Line())
	}
	if c, err := cr.Next(); err != nil || c.ID != "ok" || cr.Line() != 3 {
		t.Errorf("line 3: %+v %v at line %d", c, err, cr.Line())
	}
}

// BenchmarkCaseReaderBigLog reads a 100 MB recorded log; see the B/op figure
// for what one case costs.
func BenchmarkCaseReaderBigLog(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		cr := NewCaseReader(bigLogCase(100 << 20))
		c, err := cr.Next()
		if err != nil {
			b.Fatal(err)
		}
		Cell(c.Input())
	}
}
