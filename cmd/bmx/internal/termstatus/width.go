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

// LineWidth is the width lines of a message written to w are cut to: as
// Width on a terminal (its columns, or COLUMNS where it does not say), and
// 0, no cutting at all, elsewhere: a CI log or a file keeps every line
// whole, since nothing there would wrap or hide the end of one.
func LineWidth(w io.Writer) int {
	if !isCharDevice(w) {
		return 0
	}
	return Width(w)
}

// isCharDevice reports whether w is a terminal (or another character
// device), whatever TERM says.
func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
