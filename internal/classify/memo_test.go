package classify

import (
	"testing"

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
	memo := observationMemo{}
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
	if len(memo) == 0 || len(memo) > n {
		t.Errorf("the memo holds %d judgements of %d observations", len(memo), n)
	}
}
