package classify

import (
	"bytes"
	"encoding/json"
	"errors"
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

// TestCaseLogprobs: a case gives logprobs in OpenAI's shape or as a flat
// top_logprobs list, with NaN written as null or as a string; any value
// that is not a finite number makes the probe nan whatever its text, and
// bmx's own summary shape still reads.
func TestCaseLogprobs(t *testing.T) {
	probe := func(extra string) string {
		return `{"id":"x","log":"","exit":null,"probes":[{"name":"p","prompt":"Say 'OK'","expect":{"contains":"OK"},"text":"OK","http_status":200` + extra + `}]}`
	}
	tests := []struct {
		name, extra                    string
		want                           Verdict
		null, nonFinite, tokens, steps int
	}{
		{"openai finite", `,"logprobs":{"content":[{"token":"OK","logprob":-0.01,"top_logprobs":[{"token":"OK","logprob":-0.01},{"token":"Ok","logprob":-4.2}]}]}`, Correct, 0, 0, 1, 1},
		{"openai string NaN", `,"logprobs":{"content":[{"token":"OK","logprob":"NaN","top_logprobs":[{"token":"OK","logprob":"nan"}]}]}`, NaN, 0, 2, 1, 0},
		{"openai null", `,"logprobs":{"content":[{"token":"OK","logprob":null,"top_logprobs":[]}]}`, NaN, 1, 0, 1, 0},
		{"candidate only", `,"logprobs":{"content":[{"token":"OK","logprob":-0.01,"top_logprobs":[{"token":"OK","logprob":-0.01},{"token":"Ok","logprob":"-Infinity"}]}]}`, NaN, 0, 1, 1, 1},
		{"candidate without a logprob", `,"logprobs":{"content":[{"token":"OK","logprob":-0.01,"top_logprobs":[{"token":"Ok"}]}]}`, NaN, 1, 0, 1, 0},
		{"flat list", `,"top_logprobs":[{"token":"OK","logprob":null},{"token":"Ok","logprob":"inf"}]`, NaN, 1, 1, 0, 0},
		{"flat list finite", `,"top_logprobs":[{"token":"OK","logprob":"-0.5"},{"token":"Ok","logprob":-3}]`, Correct, 0, 0, 0, 0},
		{"bmx summary", `,"logprobs":{"tokens":3,"null":1,"min":-0.5}`, NaN, 1, 0, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCase([]byte(probe(tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			lp := c.Probes[0].Logprobs
			if lp == nil || lp.Null != tt.null || lp.NonFinite != tt.nonFinite || lp.Tokens != tt.tokens || len(lp.Steps) != tt.steps {
				t.Errorf("logprobs %+v, want %d null, %d non-finite, %d tokens, %d steps", lp, tt.null, tt.nonFinite, tt.tokens, tt.steps)
			}
			j := Cell(c.Input())
			if j.Verdict != tt.want {
				t.Errorf("verdict %s (%s), want %s", j.Verdict, j.Reason, tt.want)
			}
			if j.Verdict == NaN && j.Signature != nanLogprobsEvidence {
				t.Errorf("signature %q", j.Signature)
			}
		})
	}
	_, err := ParseCase([]byte(probe(`,"logprobs":{"content":[{"token":"OK","logprob":"low"}]}`)))
	var ce *CaseError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `logprob "low" is not a number`) {
		t.Errorf("a logprob that is no number: %v", err)
	}
}

// TestJudgeCases: every case is handed on in order with its judgement; a
// bad line is named and skipped; a file that is not JSON at all stops at
// once.
func TestJudgeCases(t *testing.T) {
	in := `{"id":"a","log":"","exit":{"code":1,"signal":""},"probes":[]}
not json
{"id":"","log":""}
{"id":"b","log":"","exit":null,"probes":[{"name":"p","prompt":"Say 'OK'","expect":{"contains":"OK"},"text":"OK","http_status":200}]}
`
	var got, bad []string
	n, err := JudgeCases(strings.NewReader(in), "f", func(c *Case, j Judgement) error {
		got = append(got, c.ID+"="+string(j.Verdict))
		return nil
	}, func(msg string) { bad = append(bad, msg) })
	if err != nil || n != 2 || strings.Join(got, " ") != "a=crash b=correct" {
		t.Errorf("%d bad, err %v, judged %v", n, err, got)
	}
	if len(bad) != 2 || !strings.HasPrefix(bad[0], "f:2: ") || !strings.HasPrefix(bad[1], "f:3: case has no id") {
		t.Errorf("bad lines %q", bad)
	}
	_, err = JudgeCases(strings.NewReader("<html>\n"), "f", func(*Case, Judgement) error { return nil }, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "not a JSON Lines file of cases") {
		t.Errorf("not JSON: %v", err)
	}
}
