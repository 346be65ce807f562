package classify

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestObservationMemo judges every corpus case through one memo, twice
// (the second pass from the memo), and expects each judgement, cell and
// probes, to be what judging without a memo gives.
func TestObservationMemo(t *testing.T) {
	var cases []*Case
	for _, p := range corpora {
		cases = append(cases, loadCases(t, p)...)
	}
	memo := observationMemo{}
	for pass := range 2 {
		for _, c := range cases {
			want := judgeCell(c.Input())
			if got := judgeCellWith(c.Input(), memo); !cmp.Equal(got, want) {
				t.Errorf("pass %d: %s: through the memo %s", pass, c.ID, cmp.Diff(want, got))
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
