//go:build unix

package termstatus

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalColumns asks the terminal f is for its width.
func terminalColumns(f *os.File) (int, bool) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0, false
	}
	return int(ws.Col), true
}
