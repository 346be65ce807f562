package reports

import (
	"bytes"
	"testing"

	"github.com/bmx-dev/bmx/internal/record"
)

// TestReasonNotCutShort: at any width, a per-cell table that keeps the
// reason column beside the signature keeps reasonMin columns of it (or all
// of it): before it would cut the reason shorter, it leaves out the ready
// time and shows the signature of failed cells in the reason's place, which
// gives that column the rest of the terminal's width.
func TestReasonNotCutShort(t *testing.T) {
	h200, err := record.Load("../../examples/torch-gpu/h200/run")
	if err != nil {
		t.Fatal(err)
	}
	for name, rep := range map[string]*record.Report{"h200": h200, "fixture": fixture()} {
		t.Run(name, func(t *testing.T) {
			var whole bytes.Buffer
			if err := TableWith(&whole, rep, TableOptions{Width: 10000}); err != nil {
				t.Fatal(err)
			}
			wholeLines, _ := findDetailTable(t, whole.String())
			natural := columnWidths(wholeLines)["reason"]
			for width := 80; width <= 320; width += 4 {
				var b bytes.Buffer
				if err := TableWith(&b, rep, TableOptions{Width: width}); err != nil {
					t.Fatal(err)
				}
				lines, _ := findDetailTable(t, b.String())
				w, shown := columnWidths(lines)["reason"]
				if shown && w < min(natural, reasonMin) {
					t.Errorf("width %d: the reason cut to %d columns (of %d)", width, w, natural)
				}
			}
		})
	}
}
