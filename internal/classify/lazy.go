package classify

import (
	"regexp"
	"sync"
)

// lazyRegexp is a regular expression compiled on its first use. The
// classifier holds some sixty; compiled as package variables they cost
// every bmx process 9 ms of its start on two cores (a sweep, and each
// supervisor bmx starts, which never judges anything), before the first
// cell could start.
type lazyRegexp struct {
	once sync.Once
	expr string
	re   *regexp.Regexp
}

// everyRegexp lists the classifier's expressions, so a test can compile
// each (a bad one would otherwise panic only when a text first needs it).
var everyRegexp []*lazyRegexp

// lazyRE is regexp.MustCompile(expr), deferred to the first use.
func lazyRE(expr string) *lazyRegexp {
	l := &lazyRegexp{expr: expr}
	everyRegexp = append(everyRegexp, l)
	return l
}

// get is the compiled expression.
func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

func (l *lazyRegexp) Match(b []byte) bool        { return l.get().Match(b) }
func (l *lazyRegexp) MatchString(s string) bool  { return l.get().MatchString(s) }
func (l *lazyRegexp) FindString(s string) string { return l.get().FindString(s) }
func (l *lazyRegexp) FindStringIndex(s string) []int {
	return l.get().FindStringIndex(s)
}
func (l *lazyRegexp) FindStringSubmatch(s string) []string {
	return l.get().FindStringSubmatch(s)
}
func (l *lazyRegexp) FindAllString(s string, n int) []string {
	return l.get().FindAllString(s, n)
}
func (l *lazyRegexp) FindAllStringIndex(s string, n int) [][]int {
	return l.get().FindAllStringIndex(s, n)
}
func (l *lazyRegexp) ReplaceAllString(src, repl string) string {
	return l.get().ReplaceAllString(src, repl)
}
func (l *lazyRegexp) Split(s string, n int) []string { return l.get().Split(s, n) }

// Warm builds every expression and cue of the classifier, and its
// fingerprint, now instead of on first use: a sweep calls it in the
// background while its first server starts, so the first cell's verdict
// does not wait for them (the fingerprint, a scan of this package's code,
// is most of 5 ms).
func Warm() {
	for _, l := range everyRegexp {
		l.get()
	}
	for _, c := range everyCue {
		c.once.Do(c.build)
	}
	fingerprint()
}
