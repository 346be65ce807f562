package termstatus

import (
	"io"
	"os"
	"strconv"
)

// DefaultWidth is the width output fits when it does not go to a terminal
// (a file, a pipe, a CI log): the same 100 columns a report fits when it is
// given no width.
const DefaultWidth = 100

// Width is the width a terminal report written to w should fit: the
// terminal's columns when w is a terminal (or, when the terminal does not
// say, the COLUMNS environment variable), DefaultWidth otherwise.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return DefaultWidth
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return DefaultWidth
	}
	if n, ok := terminalColumns(f); ok {
		return n
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return DefaultWidth
}
