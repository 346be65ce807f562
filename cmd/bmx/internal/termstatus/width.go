package termstatus

import (
	"io"
	"os"
	"strconv"

	"github.com/bmx-dev/bmx/reports"
)

// Width is the width a terminal report written to w should fit: the
// terminal's columns when w is a terminal (or, when the terminal does not
// say, the COLUMNS environment variable), reports.DefaultWidth otherwise.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return reports.DefaultWidth
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return reports.DefaultWidth
	}
	if n, ok := terminalColumns(f); ok {
		return n
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return reports.DefaultWidth
}
