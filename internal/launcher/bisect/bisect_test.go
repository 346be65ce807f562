package bisect

import (
	"testing"
)

// TestPick checks the next value to try: the middle of the open range,
// then, around skipped values, the nearest untried one (lower first), and
// none once only skipped values are left.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lo, hi  int
		skipped []int
		want    int
		ok      bool
	}{
		{"middle of nine", 0, 8, nil, 4, true},
		{"middle of two left", 4, 6, nil, 5, true},
		{"adjacent", 5, 6, nil, 0, false},
		{"middle skipped", 0, 8, []int{4}, 5, true},
		{"middle and above skipped", 0, 8, []int{4, 5}, 3, true},
		{"only skipped left", 3, 5, []int{4}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := pick(tc.lo, tc.hi, tc.skipped)
			if got != tc.want || ok != tc.ok {
				t.Errorf("pick(%d, %d, %v) = %d, %v; want %d, %v", tc.lo, tc.hi, tc.skipped, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRunsPerLength counts the cell runs a bisect takes when the first bad
// value is anywhere in n values: the two ends and one per halving, at
// most 2 + ceil(log2(n-1)): 5 for 9 values, 7 for 33, 9 for 129.
func TestRunsPerLength(t *testing.T) {
	for n, most := range map[int]int{9: 5, 33: 7, 129: 9} {
		for bad := 1; bad < n; bad++ {
			runs, lo, hi := 2, 0, n-1
			for {
				m, ok := pick(lo, hi, nil)
				if !ok {
					break
				}
				runs++
				if m >= bad {
					hi = m
				} else {
					lo = m
				}
			}
			if hi != bad || runs > most {
				t.Errorf("%d values, first bad %d: found %d in %d runs, want it in at most %d", n, bad, hi, runs, most)
			}
		}
	}
}
