package classify

import (
	"encoding/json"
	"fmt"

	"github.com/bmx-dev/bmx/evidence"
)

// Case is one recorded outcome in the evidence corpus format (see
// ../shared/corpus/README.md): a log tail, how the process ended, whether
// the harness timed out, probe observations, and optionally a label.
type Case struct {
	ID       string                 `json:"id"`
	Label    Verdict                `json:"label,omitempty"`
	Source   string                 `json:"source,omitempty"`
	Log      string                 `json:"log"`
	Exit     *Exit                  `json:"exit"`
	TimedOut bool                   `json:"timed_out"`
	Probes   []evidence.Observation `json:"probes"`
	Note     string                 `json:"note,omitempty"`
}

// Input returns what the classifier judges of the case.
func (c *Case) Input() Input {
	return Input{Log: c.Log, Exit: c.Exit, TimedOut: c.TimedOut, Observations: c.Probes}
}

// ParseCase decodes one JSONL line of the case format.
func ParseCase(line []byte) (*Case, error) {
	var c Case
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, err
	}
	if c.ID == "" {
		return nil, fmt.Errorf("case has no id")
	}
	if c.Label != "" && !c.Label.Valid() {
		return nil, fmt.Errorf("case %s: unknown label %q", c.ID, c.Label)
	}
	return &c, nil
}
