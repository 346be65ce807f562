package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// JUnit types: one test suite per run, one test case per cell, so CI systems
// show the matrix as tests.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit renders the run as JUnit XML: a failure element for each cell that
// is not correct (its verdict as the type, the signature as the message).
func JUnit(w io.Writer, rep *record.Report) error { return JUnitWith(w, rep, nil) }

// JUnitWith is JUnit judged against a baseline run (nil: none): a cell
// correct there and failing now is a failure of type "regression", known
// issue or not, whose message says what it was before; every failure's
// text names the cell's verdict in the baseline.
func JUnitWith(w io.Writer, rep, baseline *record.Report) error {
	return JUnitGated(w, rep, baseline, nil)
}

// JUnitGated is JUnitWith for a run gated by --fail-on (gate nil: none):
// every cell that fails the gate is a failing test case that says why, so
// a job that fails shows its cause among the tests. A cell that would
// pass or be skipped (a perf-regression, a known crash gated on by its
// verdict) fails with the gate's word as the type; a cell that fails
// anyway has the gate's reasons added to its text.
func JUnitGated(w io.Writer, rep, baseline *record.Report, gate *GateResult) error {
	trips := map[string][]Trip{}
	if gate != nil {
		for _, t := range gate.Trips {
			trips[t.Cell] = append(trips[t.Cell], t)
		}
	}
	suite := junitSuite{Name: xmlSafe("bmx " + rep.Run.Name), Tests: len(rep.Results)}
	before := map[string]classify.Verdict{}
	if baseline != nil {
		for _, r := range baseline.Results {
			before[r.Cell.ID] = r.Verdict
		}
	}
	var total float64
	for _, r := range rep.Results {
		secs := float64(r.Timings.TotalMS) / 1000
		total += secs
		c := junitCase{Name: xmlSafe(r.Cell.ID), Classname: xmlSafe("bmx." + rep.Run.Name), Time: fmt.Sprintf("%.3f", secs), SystemOut: xmlSafe(r.Repro)}
		st, known := Status(rep, r)
		prev, inBase := before[r.Cell.ID]
		regressed := inBase && prev == classify.Correct && failed(r.Verdict)
		switch {
		case st == XPass:
			// A known issue that now passes: the workaround can go.
			suite.Failures++
			msg := "XPASS: a known issue now passes"
			if known.Issue != "" {
				msg += ": " + known.Issue
			}
			c.Failure = &junitFailure{Message: xmlSafe(msg), Type: "xpass", Text: xmlSafe(r.Reason)}
		case r.Verdict == classify.Correct:
		case r.Verdict == classify.Skipped:
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: xmlSafe(r.Reason)}
		case st == XFail && !regressed:
			// A known failure is no news: skipped, with the issue as reason.
			suite.Skipped++
			msg := "known issue (XFAIL, " + string(r.Verdict) + ")"
			if known.Issue != "" {
				msg += ": " + known.Issue
			}
			c.Skipped = &junitSkipped{Message: xmlSafe(msg)}
		default:
			suite.Failures++
			c.Failure = junitFailed(rep, r, baseline, prev, inBase, regressed)
		}
		if ts := trips[r.Cell.ID]; len(ts) > 0 {
			gateFailure(&suite, &c, gate, ts)
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Time = fmt.Sprintf("%.3f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// gateFailure makes c a failing case that says why the cell failed the
// gate: the trips' texts, added to the failure a failing cell has, or a
// failure of the first trip's word for a cell that passed or was skipped.
func gateFailure(suite *junitSuite, c *junitCase, gate *GateResult, ts []Trip) {
	why := fmt.Sprintf("fails the gate --fail-on %s: %s", strings.Join(gate.Words, ","), gate.why(ts))
	if c.Failure != nil {
		c.Failure.Text = xmlSafe(why + "\n" + c.Failure.Text)
		return
	}
	if c.Skipped != nil {
		c.Skipped = nil
		suite.Skipped--
	}
	suite.Failures++
	c.Failure = &junitFailure{Message: xmlSafe(why), Type: ts[0].Word, Text: xmlSafe(why + "\n")}
}

// junitFailed is the failure element of a failing cell: its verdict (or
// "regression") as the type, the signature as the message, the reason,
// evidence, known status and the baseline's verdict as the text.
func junitFailed(rep *record.Report, r record.Result, baseline *record.Report, prev classify.Verdict, inBase, regressed bool) *junitFailure {
	msg := r.Signature
	if msg == "" {
		msg = r.Reason
	}
	typ := string(r.Verdict)
	switch st, k := Status(rep, r); {
	case regressed:
		typ = Regression
		msg = fmt.Sprintf("regression: correct in the baseline %s, %s now: %s", baseline.Run.Name, r.Verdict, msg)
	case st == KnownChanged:
		typ = Changed
		msg = fmt.Sprintf("changed: a [[known]] entry expects %s, %s now: %s", k.Verdict, r.Verdict, msg)
	}
	var text strings.Builder
	fmt.Fprintf(&text, "%s: %s\n", r.Verdict, r.Reason)
	if r.Evidence != "" {
		fmt.Fprintf(&text, "evidence: %s\n", r.Evidence)
	}
	if st := statusText(rep, r); st != "" {
		fmt.Fprintf(&text, "known: %s\n", st)
	}
	switch {
	case inBase:
		fmt.Fprintf(&text, "baseline %s: %s\n", baseline.Run.Name, prev)
	case baseline != nil:
		fmt.Fprintf(&text, "baseline %s: no such cell\n", baseline.Run.Name)
	}
	return &junitFailure{Message: xmlSafe(msg), Type: typ, Text: xmlSafe(text.String())}
}

// xmlSafe drops what XML 1.0 cannot carry at all (control characters, ANSI
// escapes); encoding/xml escapes the rest.
func xmlSafe(s string) string {
	s = ansiRe.ReplaceAllString(strings.ToValidUTF8(s, "\uFFFD"), "")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return r
		}
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return -1
		}
		return r
	}, s)
}
