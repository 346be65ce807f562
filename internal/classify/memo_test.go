package classify

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/google/go-cmp/cmp"
)

// TestObservationMemo judges every corpus case through one memo, and one
// Judge, twice (the second pass from memory), and expects each judgement,
// cell and probes, to be what judging without a memo gives.
func TestObservationMemo(t *testing.T) {
	var cases []*Case
	for _, p := range corpora {
		cases = append(cases, loadCases(t, p)...)
	}
	memo := newMemo()
	judge := NewJudge()
	var none *Judge
	for pass := range 2 {
		for _, c := range cases {
			in := c.Input()
			want := judgeCell(in)
			if got := judgeCellWith(in, memo); !cmp.Equal(got, want) {
				t.Errorf("pass %d: %s: through the memo %s", pass, c.ID, cmp.Diff(want, got))
			}
			// A Judge is Cell, a retried cell's earlier runs included.
			in.Earlier = []Verdict{Correct}
			want = Cell(in)
			if got, gotNil := judge.Cell(in), none.Cell(in); !cmp.Equal(got, want) || !cmp.Equal(gotNil, want) {
				t.Errorf("pass %d: %s: a Judge %s", pass, c.ID, cmp.Diff(want, got))
			}
		}
	}
	n := 0
	for _, c := range cases {
		n += len(c.Probes)
	}
	if memo.len() == 0 || memo.len() > n {
		t.Errorf("the memo holds %d judgements of %d observations", memo.len(), n)
	}
}

// TestJudgeConcurrent judges the corpus through one Judge from four
// goroutines at once, as a sweep's slots do: each judgement is Cell's.
// (go test -race also checks the memo's locking here.)
func TestJudgeConcurrent(t *testing.T) {
	var cases []*Case
	for _, p := range corpora {
		cases = append(cases, loadCases(t, p)...)
	}
	want := make([]Judgement, len(cases))
	for i, c := range cases {
		want[i] = Cell(c.Input())
	}
	judge := NewJudge()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range cases {
				i := (k + g*len(cases)/4) % len(cases)
				if got := judge.Cell(cases[i].Input()); !cmp.Equal(got, want[i]) {
					t.Errorf("goroutine %d: %s: %s", g, cases[i].ID, cmp.Diff(want[i], got))
				}
			}
		})
	}
	wg.Wait()
}

// TestMemoBounded feeds a memo observations whose texts, each a tenth of
// its limit, are all different: it never holds more than its limit of
// them, forgets and starts again when full, and judges each as Observation
// does, from memory or not. The limit is 64 KiB here, memoBytes in bmx.
func TestMemoBounded(t *testing.T) {
	const limit = 64 << 10
	memo := &memoTable{m: map[observationKey]judged{}, limit: limit}
	if newMemo().limit != memoBytes {
		t.Fatalf("newMemo's limit is %d, want memoBytes (%d)", newMemo().limit, memoBytes)
	}
	for i := range 25 {
		o := evidence.Observation{Kind: evidence.Chat, Prompt: "Say 'OK'", Text: fmt.Sprintf("%d ", i) + strings.Repeat("OK ", limit/30), MaxTokens: 32}
		for range 2 {
			v, reason, ev := memo.judge(o)
			wv, wreason, wev := Observation(o)
			if v != wv || reason != wreason || ev != wev {
				t.Fatalf("observation %d: %s %q %q through the memo, %s %q %q without", i, v, reason, ev, wv, wreason, wev)
			}
		}
		if memo.bytes > limit {
			t.Fatalf("after %d observations the memo holds %d bytes of texts, more than %d", i+1, memo.bytes, limit)
		}
		if n := memo.len(); n < 1 || n > 10 {
			t.Fatalf("after %d observations the memo holds %d, want 1 to 10", i+1, n)
		}
	}
}
