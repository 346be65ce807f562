package classify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Bounds on what a recorded case keeps of one JSON string: its head and its
// tail, as a sweep keeps the tail of a server's log. A 100 MB log line then
// costs a few hundred KiB, and the classifier judges what it would have
// judged live.
const (
	CaseStringHead = 64 << 10
	CaseStringTail = 256 << 10
)

// CaseReader reads cases one JSONL line at a time without holding a whole
// line: each JSON string longer than CaseStringHead+CaseStringTail bytes is
// cut to its head and tail, joined by " … ", as it streams past.
type CaseReader struct {
	r    *bufio.Reader
	line int
	buf  bytes.Buffer
}

// NewCaseReader reads cases from r.
func NewCaseReader(r io.Reader) *CaseReader {
	return &CaseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Line is the line number of the case Next returned last.
func (cr *CaseReader) Line() int { return cr.line }

// Next returns the next case; io.EOF after the last. A line that is not a
// case gives its error (the reader goes on with the next line). Blank lines
// are skipped.
func (cr *CaseReader) Next() (*Case, error) {
	for {
		line, err := cr.readLine()
		if err != nil && (err != io.EOF || len(bytes.TrimSpace(line)) == 0) {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return ParseCase(line)
	}
}

// JudgeCases judges every case read from in (streamed, each long string cut
// to the head and tail a sweep would keep) and hands each with its
// judgement to judged, in order. A line that is not a case is reported
// through bad ("name:line: error") and skipped; it returns how many there
// were, and the first error that stopped the reading: a read error, a
// first line that is not even JSON (the wrong file), or judged's.
func JudgeCases(in io.Reader, name string, judged func(*Case, Judgement) error, bad func(string)) (int, error) {
	cr := NewCaseReader(in)
	nbad, seen := 0, 0
	for {
		c, err := cr.Next()
		if errors.Is(err, io.EOF) {
			return nbad, nil
		}
		var notCase *CaseError
		var syn *json.SyntaxError
		switch {
		case err != nil && !errors.As(err, &notCase):
			return nbad, fmt.Errorf("%s:%d: %w", name, cr.Line(), err)
		case err != nil && seen == 0 && errors.As(err, &syn):
			return nbad, fmt.Errorf("%s:%d: not a JSON Lines file of cases (%w)", name, cr.Line(), err)
		case err != nil:
			bad(fmt.Sprintf("%s:%d: %v", name, cr.Line(), err))
			nbad++
			continue
		}
		seen++
		if err := judged(c, Cell(c.Input())); err != nil {
			return nbad, err
		}
	}
}

// readLine reads one line, cutting long JSON strings as they stream past.
func (cr *CaseReader) readLine() ([]byte, error) {
	cr.buf.Reset()
	cr.line++
	var s stringCut
	inString, escaped := false, false
	for {
		b, err := cr.r.ReadByte()
		if err != nil {
			if inString {
				cr.buf.Write(s.finish())
			}
			if errors.Is(err, io.EOF) && cr.buf.Len() > 0 {
				return cr.buf.Bytes(), nil
			}
			return cr.buf.Bytes(), err
		}
		if !inString {
			if b == '\n' {
				return cr.buf.Bytes(), nil
			}
			cr.buf.WriteByte(b)
			if b == '"' {
				inString, escaped = true, false
				s.reset()
			}
			continue
		}
		switch {
		case escaped:
			escaped = false
		case b == '\\':
			escaped = true
		case b == '"':
			inString = false
			cr.buf.Write(s.finish())
			cr.buf.WriteByte('"')
			continue
		case b == '\n':
			// A raw newline inside a string ends a broken line.
			cr.buf.Write(s.finish())
			return cr.buf.Bytes(), nil
		}
		s.add(b)
	}
}

// stringCut keeps a streaming JSON string's raw head and tail, and where
// each kept byte may start a cut: not inside an escape (\n, \uXXXX) and
// not on a UTF-8 continuation byte.
type stringCut struct {
	head     []byte
	headSafe int // the last safe cut in head
	tail     []byte
	safe     []bool // tail[i] starts a unit
	pending  int    // escape bytes still to come
	unicode  bool   // the escape is \u
	// headClean says the head ends on a whole unit (the byte after it
	// started one).
	headClean bool
	overflow  bool
}

func (s *stringCut) reset() {
	s.head, s.tail, s.safe = s.head[:0], s.tail[:0], s.safe[:0]
	s.headSafe, s.pending, s.unicode, s.headClean, s.overflow = 0, 0, false, false, false
}

func (s *stringCut) add(b byte) {
	starts := false
	switch {
	case s.pending > 0:
		s.pending--
		if s.unicode {
			s.unicode = false
			if b == 'u' {
				s.pending = 4
			}
		}
	case b == '\\':
		starts, s.pending, s.unicode = true, 1, true
	default:
		starts = b&0xC0 != 0x80
	}
	if len(s.head) < CaseStringHead {
		if starts {
			s.headSafe = len(s.head)
		}
		s.head = append(s.head, b)
		return
	}
	if !s.overflow {
		s.overflow, s.headClean = true, starts
	}
	s.tail = append(s.tail, b)
	s.safe = append(s.safe, starts)
	if len(s.tail) >= 2*CaseStringTail {
		s.tail = append(s.tail[:0], s.tail[len(s.tail)-CaseStringTail:]...)
		s.safe = append(s.safe[:0], s.safe[len(s.safe)-CaseStringTail:]...)
	}
}

// finish returns the raw string content to keep: all of it when short, else
// the head and the tail, each cut where a unit starts.
func (s *stringCut) finish() []byte {
	if len(s.tail) <= CaseStringTail {
		return append(s.head, s.tail...)
	}
	head := s.head
	if !s.headClean {
		head = head[:s.headSafe]
	}
	from := len(s.tail) - CaseStringTail
	for from < len(s.tail) && !s.safe[from] {
		from++
	}
	out := append(head, " … "...)
	return append(out, s.tail[from:]...)
}
