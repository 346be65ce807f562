package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/bmx-dev/bmx/record"
)

// maxChangesShown bounds the cells a classifier note lists one a line.
const maxChangesShown = 20

// noteJudged tells, on w, that cells of the run at dir were judged by
// another classifier than this bmx's and what judging them again changes:
// would change, or (rejudged) did. Nothing when every cell is current.
func noteJudged(w io.Writer, dir string, j record.Judged, rejudged bool) {
	if j.Current() {
		return
	}
	by := make([]string, len(j.Others))
	for i, c := range j.Others {
		by[i] = c
		if c == "" {
			by[i] = "unrecorded: an older bmx"
		}
	}
	verb, none := "--rejudge would change", "--rejudge would change no verdict"
	if rejudged {
		verb, none = "re-judged by this bmx's, which changed", "re-judged by this bmx's, which changed no verdict"
	}
	head := fmt.Sprintf("bmx: note: %s: %d cells were judged by another classifier (%s) than this bmx's (%s); ",
		dir, j.Stale, strings.Join(by, "; "), j.Classifier)
	if len(j.Changes) == 0 {
		fmt.Fprintln(w, head+none)
		return
	}
	noun := "verdicts"
	if len(j.Changes) == 1 {
		noun = "verdict"
	}
	fmt.Fprintf(w, "%s%s %d %s:\n", head, verb, len(j.Changes), noun)
	for i, c := range j.Changes {
		if i == maxChangesShown {
			fmt.Fprintf(w, "bmx:   and %d more\n", len(j.Changes)-i)
			break
		}
		fmt.Fprintf(w, "bmx:   %s: %s -> %s\n", c.Cell, c.From, c.To)
	}
}
