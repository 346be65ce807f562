package main

import (
	"fmt"
	"io"

	"github.com/bmx-dev/bmx/internal/record"
)

// maxChangesShown bounds the cells a classifier note lists one a line.
const maxChangesShown = 20

// noteJudged tells, on w, that cells of the run at dir were judged by an
// older classifier, in the sentence every reader uses (Judged.Sentence),
// and which verdicts judging them again changes: would change, or
// (rejudged) did. Nothing when every cell is current.
func noteJudged(w io.Writer, dir string, j record.Judged, rejudged bool) {
	if j.Current() {
		return
	}
	head := fmt.Sprintf("bmx: note: %s: %s", dir, j.Sentence(rejudged))
	verb := "which would change"
	if rejudged {
		verb = "which changed"
	}
	if len(j.Changes) == 0 {
		fmt.Fprintf(w, "%s, %s no verdict\n", head, verb)
		return
	}
	noun := "verdicts"
	if len(j.Changes) == 1 {
		noun = "verdict"
	}
	fmt.Fprintf(w, "%s, %s %d %s:\n", head, verb, len(j.Changes), noun)
	for i, c := range j.Changes {
		if i == maxChangesShown {
			fmt.Fprintf(w, "bmx:   and %d more\n", len(j.Changes)-i)
			break
		}
		fmt.Fprintf(w, "bmx:   %s: %s -> %s\n", c.Cell, c.From, c.To)
	}
}
