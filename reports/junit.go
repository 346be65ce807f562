package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/record"
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
func JUnit(w io.Writer, rep *record.Report) error {
	suite := junitSuite{Name: xmlSafe("bmx " + rep.Run.Name), Tests: len(rep.Results)}
	var total float64
	for _, r := range rep.Results {
		secs := float64(r.Timings.TotalMS) / 1000
		total += secs
		c := junitCase{Name: xmlSafe(r.Cell.ID), Classname: xmlSafe("bmx." + rep.Run.Name), Time: fmt.Sprintf("%.3f", secs), SystemOut: xmlSafe(r.Repro)}
		st, known := Status(rep, r)
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
		case st == XFail:
			// A known failure is no news: skipped, with the issue as reason.
			suite.Skipped++
			msg := "known issue (XFAIL, " + string(r.Verdict) + ")"
			if known.Issue != "" {
				msg += ": " + known.Issue
			}
			c.Skipped = &junitSkipped{Message: xmlSafe(msg)}
		default:
			suite.Failures++
			msg := r.Signature
			if msg == "" {
				msg = r.Reason
			}
			var text strings.Builder
			fmt.Fprintf(&text, "%s: %s\n", r.Verdict, r.Reason)
			if r.Evidence != "" {
				fmt.Fprintf(&text, "evidence: %s\n", r.Evidence)
			}
			if st := statusText(rep, r); st != "" {
				fmt.Fprintf(&text, "known: %s\n", st)
			}
			c.Failure = &junitFailure{Message: xmlSafe(msg), Type: string(r.Verdict), Text: xmlSafe(text.String())}
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
