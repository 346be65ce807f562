package record

import (
	"regexp"
	"strings"
	"unicode"
)

// ansiRe matches the terminal escapes (CSI and OSC sequences) that server
// text may carry.
var ansiRe = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)`)

// Clean makes recorded text (a server's output, a cell ID built from a
// config) safe for a terminal or a document: ANSI escapes and control
// characters are removed (newlines and tabs become spaces) and invalid UTF-8
// is replaced. It lives with the record, whose text fields it is for, so
// every reader of a run cleans alike without importing a renderer.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = ansiRe.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
}
