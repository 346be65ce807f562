package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// What a reader takes of one line of results.jsonl. A line bmx writes is
// 3 to 200 KB (Observation.Cap bounds what a probe keeps), but a line of
// another writer, or of an older bmx, may be any size: a valid 200 MB line
// once made `bmx report` take 1.9 GB and a resume write three 200 MB
// reports. A line longer than MaxLine is read cut: each string keeps its
// first evidence.KeepHead bytes and a marker of what was cut, each list its
// first MaxLineItems items, and the result says so in its Problems.
const (
	MaxLine      = 16 << 20
	MaxLineItems = 4096
)

// readLine reads one line of br, its newline included, as ReadBytes does;
// a line longer than MaxLine comes back cut (lineCutter), with full its
// size as read (0: not cut).
func readLine(br *bufio.Reader) (line []byte, full int64, err error) {
	var cut *lineCutter
	for {
		chunk, err := br.ReadSlice('\n')
		full += int64(len(chunk))
		switch {
		case cut != nil:
			cut.write(chunk)
		case len(line)+len(chunk) > MaxLine:
			cut = &lineCutter{}
			cut.write(line)
			cut.write(chunk)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if cut == nil {
			return line, 0, err
		}
		return cut.out.Bytes(), full, err
	}
}

// afterLastNewline is the offset just after the last newline of f (0:
// none) and f's size, read backwards from its end a block at a time.
func afterLastNewline(f *os.File) (keep, size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, size, nil
		}
		end = start
	}
	return 0, size, nil
}

// cutNote is the problem a result read from a cut line records.
func cutNote(full int64) string {
	return fmt.Sprintf("the cell's line in results.jsonl is %.1f MB, past the %d MB bmx reads whole: bmx read it cut (each text its first %d KB, each list its first %d items)",
		float64(full)/1e6, MaxLine>>20, evidence.KeepHead>>10, MaxLineItems)
}

// readCut marks a result read from a line cut by readLine: its
// observations cut as a probe cuts them (Observation.Cap: their logprob
// steps too), and a problem that says so.
func (r *Result) readCut(full int64) {
	for i := range r.Observations {
		r.Observations[i].Cap()
	}
	r.Problems = append(r.Problems, cutNote(full))
}

// lineCutter copies a JSON value as it streams by, cutting each string to
// evidence.KeepHead bytes (on a rune and escape boundary, with a marker of
// how much was cut) and each array to MaxLineItems items, so what it keeps
// of a line of any size is bounded and still valid JSON.
type lineCutter struct {
	out bytes.Buffer
	// arrays says, for each open container, whether it is an array, and
	// items how many items of it have begun.
	arrays []bool
	items  []int
	// In a string: its kept length, the bytes dropped, and where an escape
	// stands (esc after a backslash, hex the \u digits still to come).
	inString bool
	kept     int
	dropped  int64
	esc      bool
	hex      int
	// skipping drops the items of an array past its MaxLineItems, to
	// its end: skipDepth is the nesting within them, skipStr and skipEsc
	// where a string of theirs stands.
	skipping  bool
	skipDepth int
	skipStr   bool
	skipEsc   bool
}

func (c *lineCutter) write(p []byte) {
	for _, b := range p {
		c.byte(b)
	}
}

func (c *lineCutter) byte(b byte) {
	if c.skipping {
		c.skip(b)
		return
	}
	if c.inString {
		c.stringByte(b)
		return
	}
	switch b {
	case '"':
		c.inString, c.kept, c.dropped, c.esc, c.hex = true, 0, 0, false, 0
	case '[', '{':
		c.arrays, c.items = append(c.arrays, b == '['), append(c.items, 0)
	case ']', '}':
		if n := len(c.arrays); n > 0 {
			c.arrays, c.items = c.arrays[:n-1], c.items[:n-1]
		}
	case ',':
		if n := len(c.arrays); n > 0 && c.arrays[n-1] {
			c.items[n-1]++
			if c.items[n-1] >= MaxLineItems {
				c.skipping, c.skipDepth, c.skipStr, c.skipEsc = true, 0, false, false
				return // the comma and the items after it are dropped
			}
		}
	}
	c.out.WriteByte(b)
}

// stringByte is b inside a string.
func (c *lineCutter) stringByte(b byte) {
	switch {
	case c.esc:
		c.esc = false
		if b == 'u' {
			c.hex = 4
		}
	case c.hex > 0:
		c.hex--
	case b == '\\':
		c.esc = true
		if c.kept >= evidence.KeepHead {
			c.dropped++ // an escape after the cut: dropped whole
			return
		}
	case b == '"':
		if c.dropped > 0 {
			fmt.Fprintf(&c.out, " … [bmx cut %d bytes: a line too long to read whole]", c.dropped)
		}
		c.inString = false
		c.out.WriteByte(b)
		return
	default:
		if c.kept >= evidence.KeepHead && (c.dropped > 0 || utf8.RuneStart(b)) {
			c.dropped++
			return
		}
	}
	if c.dropped > 0 { // the rest of an escape begun after the cut
		c.dropped++
		return
	}
	c.kept++
	c.out.WriteByte(b)
}

// skip is b in the dropped items of a cut array: the array's own closing
// bracket ends the skipping.
func (c *lineCutter) skip(b byte) {
	switch {
	case c.skipStr && c.skipEsc:
		c.skipEsc = false
	case c.skipStr && b == '\\':
		c.skipEsc = true
	case c.skipStr && b == '"':
		c.skipStr = false
	case c.skipStr:
	case b == '"':
		c.skipStr = true
	case b == '[' || b == '{':
		c.skipDepth++
	case b == ']' || b == '}':
		if c.skipDepth > 0 {
			c.skipDepth--
			return
		}
		c.skipping = false
		c.byte(b) // the array's end
	}
}
