//go:build !unix

package termstatus

import "os"

// terminalColumns is unknown off Unix: COLUMNS or the default decide.
func terminalColumns(*os.File) (int, bool) { return 0, false }
