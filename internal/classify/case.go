package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Case is one recorded outcome in the evidence corpus format (see
// ../shared/corpus/README.md): a log tail, how the process ended, whether
// the harness timed out, probe observations, and optionally a label.
type Case struct {
	ID       string                 `json:"id"`
	Label    Verdict                `json:"label,omitempty"`
	Source   string                 `json:"source,omitempty"`
	Log      string                 `json:"log"`
	Exit     *evidence.Exit         `json:"exit"`
	TimedOut bool                   `json:"timed_out"`
	Probes   []evidence.Observation `json:"probes"`
	Note     string                 `json:"note,omitempty"`
}

// Input returns what the classifier judges of the case.
func (c *Case) Input() Input {
	return Input{Log: c.Log, Exit: c.Exit, TimedOut: c.TimedOut, Observations: c.Probes}
}

// CaseError says why a line is not a case: it is not JSON, or not a case
// (no id, an unknown label, a logprob that is no number). A reader goes on
// with the next line.
type CaseError struct{ Err error }

func (e *CaseError) Error() string { return e.Err.Error() }
func (e *CaseError) Unwrap() error { return e.Err }

// ParseCase decodes one JSONL line of the case format; its errors are
// *CaseError.
func ParseCase(line []byte) (*Case, error) {
	var c Case
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, &CaseError{err}
	}
	if c.ID == "" {
		return nil, &CaseError{errors.New("case has no id")}
	}
	if c.Label != "" && !c.Label.Valid() {
		return nil, &CaseError{fmt.Errorf("case %s: unknown label %q", c.ID, c.Label)}
	}
	if err := readCaseLogprobs(line, c.Probes); err != nil {
		return nil, &CaseError{fmt.Errorf("case %s: %w", c.ID, err)}
	}
	return &c, nil
}

// CaseVerdict is what `bmx classify` prints for one case. ShapeOnly marks a
// correct verdict that some probe reached by its text's shape alone (no
// expectation, no reference): reports show it as correct*.
type CaseVerdict struct {
	ID        string  `json:"id"`
	Verdict   Verdict `json:"verdict"`
	Signature string  `json:"signature"`
	Reason    string  `json:"reason"`
	ShapeOnly bool    `json:"shape_only,omitempty"`
}

// VerdictOf is the line printed for case c judged j.
func VerdictOf(c *Case, j Judgement) CaseVerdict {
	return CaseVerdict{ID: c.ID, Verdict: j.Verdict, Signature: j.Signature, Reason: j.Reason,
		ShapeOnly: j.ShapeOnly && j.Verdict == Correct}
}

// readCaseLogprobs reads the logprobs a case gives in the shapes a server
// returns them, besides bmx's own summary (evidence.Logprobs): OpenAI's
// "logprobs": {"content": [{"token", "logprob", "top_logprobs": [...]}]}
// and a flat "top_logprobs": [{"token", "logprob"}] on the probe. Either
// becomes the probe's summary, each null or non-finite value counted, so a
// NaN there makes the probe nan whatever its text.
func readCaseLogprobs(line []byte, probes []evidence.Observation) error {
	var raw struct {
		Probes []struct {
			Logprobs    json.RawMessage `json:"logprobs"`
			TopLogprobs []caseAlt       `json:"top_logprobs"`
		} `json:"probes"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return err
	}
	for i, p := range raw.Probes {
		if i >= len(probes) {
			break
		}
		var openAI struct {
			Content *[]caseToken `json:"content"`
		}
		if len(p.Logprobs) > 0 && bytes.HasPrefix(bytes.TrimSpace(p.Logprobs), []byte("{")) {
			if err := json.Unmarshal(p.Logprobs, &openAI); err != nil {
				return fmt.Errorf("probe %s: logprobs: %w", probes[i].Probe, err)
			}
		}
		if openAI.Content == nil && p.TopLogprobs == nil {
			continue
		}
		lp := &evidence.Logprobs{}
		if openAI.Content != nil {
			lp = openAILogprobs(*openAI.Content)
		}
		for _, a := range p.TopLogprobs {
			a.Logprob.count(lp)
		}
		probes[i].Logprobs = lp
	}
	return nil
}

// caseToken is one position of OpenAI's logprobs.content.
type caseToken struct {
	Token       string      `json:"token"`
	Logprob     caseLogprob `json:"logprob"`
	TopLogprobs []caseAlt   `json:"top_logprobs"`
}

// caseAlt is one candidate of a top_logprobs list.
type caseAlt struct {
	Token   string      `json:"token"`
	Logprob caseLogprob `json:"logprob"`
}

// openAILogprobs summarises OpenAI-shaped logprobs as the probe client
// does: one step per position, the finite candidates kept for the
// numerics, every null or non-finite value (the chosen token's or a
// candidate's) counted.
func openAILogprobs(content []caseToken) *evidence.Logprobs {
	lp := &evidence.Logprobs{Tokens: len(content), Min: math.Inf(1)}
	withTop := false
	for _, t := range content {
		st := evidence.Step{Token: t.Token}
		if t.Logprob.count(lp) {
			st.Logprob = t.Logprob.v
			lp.Min = min(lp.Min, t.Logprob.v)
		}
		for _, a := range t.TopLogprobs {
			if a.Logprob.count(lp) {
				st.Top = append(st.Top, evidence.Alt{Token: a.Token, Logprob: a.Logprob.v})
			}
		}
		withTop = withTop || len(st.Top) > 0
		lp.Steps = append(lp.Steps, st)
	}
	if !withTop {
		lp.Steps = nil
	}
	if math.IsInf(lp.Min, 1) {
		lp.Min = 0
	}
	return lp
}

// caseLogprob is a logprob as a case writes it: a number, null (or
// absent), or a string, since JSON has no NaN: "NaN", "nan", "inf",
// "-Infinity" or a number in quotes.
type caseLogprob struct {
	v       float64
	present bool
	null    bool
}

func (l *caseLogprob) UnmarshalJSON(b []byte) error {
	l.present = true
	if string(b) == "null" {
		l.null = true
		return nil
	}
	s := string(b)
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("logprob %s is not a number", b)
	}
	l.v = v
	return nil
}

// count adds the value to lp's null or non-finite counts and reports
// whether it is a finite number. A value that is absent counts as null:
// the server gave no number where one belongs. Infinities count as the
// probe client counts them (a live server's -Infinity reaches it as
// null): a server clamps a masked candidate to a finite floor, as vLLM
// does (-9999).
func (l caseLogprob) count(lp *evidence.Logprobs) bool {
	switch {
	case !l.present || l.null:
		lp.Null++
	case math.IsNaN(l.v) || math.IsInf(l.v, 0):
		lp.NonFinite++
	default:
		return true
	}
	return false
}
