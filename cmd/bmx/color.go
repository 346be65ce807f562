package main

import (
	"io"
	"os"
)

// colorOK says whether to colour output to w: only on a terminal, and never
// when NO_COLOR is set (https://no-color.org).
func colorOK(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	return isTerminal(w)
}
