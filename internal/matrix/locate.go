package matrix

import (
	"regexp"
	"strconv"
	"strings"
)

// locator maps TOML key paths to the line that defines them. BurntSushi/toml
// reports positions only for syntax and type errors; validation errors (an
// unknown key, a duplicate value, an undefined placeholder) must name a line
// too, so the file is scanned once more here. The scan understands table
// headers, arrays of tables, dotted keys, multi-line arrays and inline tables,
// which is all a matrix file uses; a key it cannot place falls back to its
// nearest located parent.
type locator struct {
	lines map[string]int // "axis[1].values[2].name" -> line
	plain map[string]int // "axis.values.name" -> first line
}

// KeyLine returns the line of a key in a TOML document, for errors found
// after decoding in files other than a matrix (a probe file): path elements
// like "[2]" index arrays of tables ("probe", "[2]", "temperature"). A key
// that is not in the text gives the line of its nearest parent that is, or 0.
func KeyLine(src []byte, path ...string) int {
	return newLocator(string(src)).line(path...)
}

func newLocator(src string) *locator {
	l := &locator{lines: map[string]int{}, plain: map[string]int{}}
	var (
		table  []string           // current table path, with [i] on arrays of tables
		counts = map[string]int{} // array-of-tables header -> occurrences so far
		stack  []frame            // open arrays and inline tables
	)
	for n, line := range strings.Split(src, "\n") {
		lineNo := n + 1
		s := stripComment(line)
		t := strings.TrimSpace(s)
		if len(stack) == 0 {
			switch {
			case strings.HasPrefix(t, "[["):
				name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, "[["), "]]"))
				idx := counts[name]
				counts[name] = idx + 1
				table = append(splitKey(name), "["+strconv.Itoa(idx)+"]")
				l.add(table, lineNo)
				continue
			case strings.HasPrefix(t, "["):
				name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, "["), "]"))
				table = resolveTable(splitKey(name), counts)
				l.add(table, lineNo)
				continue
			}
		}
		l.scan(s, lineNo, table, &stack)
	}
	return l
}

// frame is an open array or inline table during the scan.
type frame struct {
	path   []string
	inline bool // an inline table; otherwise an array
	index  int  // next element index, for arrays
	// expectValue is set in an array after "[" or ",", until an element starts.
	expectValue bool
}

// scan walks one line's characters, recording keys at top level and inside
// inline tables, the elements of arrays, and tracking brackets outside
// strings.
func (l *locator) scan(s string, lineNo int, table []string, stack *[]frame) {
	top := func() *frame {
		if len(*stack) == 0 {
			return nil
		}
		return &(*stack)[len(*stack)-1]
	}
	cur := func() []string {
		if f := top(); f != nil {
			return f.path
		}
		return table
	}
	inArray := func() bool { f := top(); return f != nil && !f.inline }
	expectKey := top() == nil || top().inline
	var lastKey []string
	// elem records the start of an array element and returns its path.
	elem := func() []string {
		p := arrayElem(stack)
		l.add(p, lineNo)
		top().expectValue = false
		return p
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\r' {
			continue
		}
		if inArray() && top().expectValue && c != ']' && c != ',' && c != '[' && c != '{' {
			elem()
		}
		switch {
		case c == '"' || c == '\'':
			j := skipString(s, i)
			if expectKey {
				if k := quotedKey(s, i, j, cur()); k != nil {
					lastKey = k
				}
			}
			i = j
		case c == '=':
			if lastKey != nil {
				l.add(lastKey, lineNo)
			}
			expectKey = false
		case c == '[' || c == '{':
			p := cur()
			switch {
			case inArray():
				p = elem()
			case lastKey != nil:
				p = lastKey
			}
			*stack = append(*stack, frame{path: p, inline: c == '{', expectValue: c == '['})
			lastKey = nil
			expectKey = c == '{'
		case c == ']' || c == '}':
			if len(*stack) > 0 {
				*stack = (*stack)[:len(*stack)-1]
			}
			lastKey = nil
		case c == ',':
			lastKey = nil
			if f := top(); f != nil {
				expectKey = f.inline
				f.expectValue = !f.inline
			}
		case isBareKeyChar(c) && expectKey:
			m := bareKeyRe.FindStringSubmatch(s[i:])
			if m == nil {
				continue
			}
			lastKey = append(append([]string{}, cur()...), splitKey(m[1])...)
			i += len(m[1]) - 1
		}
	}
}

// quotedKey is the path under parent of the quoted string s[i:j+1] when it
// is a key (an "=" or a "." follows it), nil when it is a value.
func quotedKey(s string, i, j int, parent []string) []string {
	rest := strings.TrimSpace(s[j+1:])
	if !strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, ".") {
		return nil
	}
	k := s[i+1 : j]
	if s[i] == '"' {
		k, _ = strconv.Unquote(s[i : j+1])
	}
	return append(append([]string{}, parent...), k)
}

// arrayElem returns the path of the next element of the innermost array.
func arrayElem(stack *[]frame) []string {
	top := &(*stack)[len(*stack)-1]
	p := append(append([]string{}, top.path...), "["+strconv.Itoa(top.index)+"]")
	top.index++
	return p
}

func (l *locator) add(path []string, line int) {
	full := strings.Join(path, ".")
	if _, ok := l.lines[full]; !ok {
		l.lines[full] = line
	}
	plain := plainKey(path)
	if _, ok := l.plain[plain]; !ok {
		l.plain[plain] = line
	}
}

// line returns the line of path (elements like "[2]" index arrays), or of its
// nearest located parent, or 0.
func (l *locator) line(path ...string) int {
	for n := len(path); n > 0; n-- {
		if ln, ok := l.lines[strings.Join(path[:n], ".")]; ok {
			return ln
		}
		if ln, ok := l.plain[plainKey(path[:n])]; ok {
			return ln
		}
	}
	return 0
}

// plainKey drops array indexes: axis.[1].values -> axis.values.
func plainKey(path []string) string {
	var parts []string
	for _, p := range path {
		if !strings.HasPrefix(p, "[") {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ".")
}

// resolveTable gives [a.b] headers under an array of tables the index of its
// latest element, as TOML does.
func resolveTable(parts []string, counts map[string]int) []string {
	var out []string
	for i, p := range parts {
		out = append(out, p)
		if c, ok := counts[strings.Join(parts[:i+1], ".")]; ok && c > 0 {
			out = append(out, "["+strconv.Itoa(c-1)+"]")
		}
	}
	return out
}

func splitKey(k string) []string {
	var out []string
	for _, p := range strings.Split(k, ".") {
		p = strings.TrimSpace(p)
		if uq, err := strconv.Unquote(p); err == nil {
			p = uq
		}
		out = append(out, strings.Trim(p, "'"))
	}
	return out
}

var bareKeyRe = regexp.MustCompile(`^([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=`)

func isBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// skipString returns the index of the quote that closes the string starting
// at s[i]; the end of the line if it is unterminated.
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if q == '"' && s[j] == '\\' {
			j++
			continue
		}
		if s[j] == q {
			return j
		}
	}
	return len(s) - 1
}

// stripComment removes a # comment that is outside strings.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			i = skipString(s, i)
		case '#':
			return s[:i]
		}
	}
	return s
}
