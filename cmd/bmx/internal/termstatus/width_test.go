package termstatus

import (
	"bytes"
	"os"
	"testing"

	"github.com/bmx-dev/bmx/internal/reports"
)

func TestWidth(t *testing.T) {
	if DefaultWidth != reports.DefaultWidth {
		t.Errorf("DefaultWidth %d, reports.DefaultWidth %d: a report written off a terminal must fit what a report given no width fits", DefaultWidth, reports.DefaultWidth)
	}
	var b bytes.Buffer
	if got := Width(&b); got != DefaultWidth {
		t.Errorf("a buffer: %d", got)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Setenv("COLUMNS", "250")
	if got := Width(f); got != DefaultWidth {
		t.Errorf("a file, COLUMNS=250: %d, want %d (COLUMNS counts only on a terminal)", got, DefaultWidth)
	}
	if got := LineWidth(f); got != 0 {
		t.Errorf("LineWidth of a file, COLUMNS=250: %d, want 0 (lines whole off a terminal)", got)
	}
	if got := LineWidth(&b); got != 0 {
		t.Errorf("LineWidth of a buffer: %d, want 0", got)
	}
}
