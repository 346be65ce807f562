package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/classify"
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

// CaseVerdict is what `bmx classify` prints for one recorded case.
type CaseVerdict struct {
	ID        string           `json:"id"`
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature"`
	Reason    string           `json:"reason"`
}

// JudgeCases judges every case read from in (streamed, each long string cut
// to the head and tail a sweep would keep), writes one CaseVerdict JSON line
// per case to out, and scores labelled cases into score. A line that is not
// a case is reported through bad (name:line: error) and skipped; it returns
// how many there were, and the first error that stopped the reading.
func JudgeCases(in io.Reader, name string, out io.Writer, score *Score, bad func(string)) (int, error) {
	cr := classify.NewCaseReader(in)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	nbad, judged := 0, 0
	for {
		c, err := cr.Next()
		if errors.Is(err, io.EOF) {
			return nbad, nil
		}
		if err != nil {
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if !errors.As(err, &syn) && !errors.As(err, &typ) && !strings.HasPrefix(err.Error(), "case ") {
				return nbad, fmt.Errorf("%s:%d: %w", name, cr.Line(), err)
			}
			if judged == 0 && errors.As(err, &syn) {
				// Not one case yet and not even JSON: the wrong file, not
				// a bad line in the right one.
				return nbad, fmt.Errorf("%s:%d: not a JSON Lines file of cases (%v)", name, cr.Line(), err)
			}
			bad(fmt.Sprintf("%s:%d: %v", name, cr.Line(), err))
			nbad++
			continue
		}
		judged++
		j := classify.Cell(c.Input())
		if err := enc.Encode(CaseVerdict{c.ID, j.Verdict, j.Signature, j.Reason}); err != nil {
			return nbad, err
		}
		if c.Label != "" {
			score.Add(c.ID, c.Label, j.Verdict)
		}
	}
}
