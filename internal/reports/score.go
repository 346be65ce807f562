package reports

import (
	"fmt"
	"io"
	"slices"

	"github.com/bmx-dev/bmx/internal/classify"
)

// Score tallies verdicts against labels: accuracy and a confusion matrix.
type Score struct {
	matrix       map[[2]classify.Verdict]int // label, verdict
	total, right int
	falseCorrect []string
}

// NewScore returns an empty score.
func NewScore() *Score { return &Score{matrix: map[[2]classify.Verdict]int{}} }

// Add counts one labelled case.
func (s *Score) Add(id string, label, verdict classify.Verdict) {
	s.matrix[[2]classify.Verdict{label, verdict}]++
	s.total++
	if label == verdict {
		s.right++
	}
	if verdict == classify.Correct && failed(label) {
		s.falseCorrect = append(s.falseCorrect, id)
	}
}

// Total is the number of labelled cases.
func (s *Score) Total() int { return s.total }

// Accuracy is the share of cases judged as labelled.
func (s *Score) Accuracy() float64 {
	if s.total == 0 {
		return 0
	}
	return float64(s.right) / float64(s.total)
}

// FalseCorrect lists cases labelled as failures but judged correct: the
// worst mistake a classifier can make.
func (s *Score) FalseCorrect() []string { return s.falseCorrect }

// Render prints the accuracy and the confusion matrix (rows: labels, columns:
// verdicts), only over the verdicts that occur.
func (s *Score) Render(w io.Writer) error {
	fmt.Fprintf(w, "accuracy: %d/%d = %.1f%%\n", s.right, s.total, 100*s.Accuracy())
	fmt.Fprintf(w, "failures judged correct: %d\n\n", len(s.falseCorrect))
	var used []classify.Verdict
	for _, v := range append(slices.Clone(classify.Verdicts), classify.Skipped) {
		for k := range s.matrix {
			if (k[0] == v || k[1] == v) && !slices.Contains(used, v) {
				used = append(used, v)
			}
		}
	}
	header := []string{`label \ verdict`}
	for _, v := range used {
		header = append(header, string(v))
	}
	t := newTable(w, header)
	for _, l := range used {
		row := []string{string(l)}
		any := false
		for _, v := range used {
			n := s.matrix[[2]classify.Verdict{l, v}]
			any = any || n > 0
			row = append(row, fmt.Sprint(n))
		}
		if !any {
			continue
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}
