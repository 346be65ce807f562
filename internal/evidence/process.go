package evidence

import "fmt"

// Exit is how a server process ended on its own. Signal is a name such as
// "SIGKILL"; Code is -1 when a signal ended it.
type Exit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal"`
}

func (e *Exit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// Forensics is the state of a hung server captured before it was killed.
type Forensics struct {
	PIDs      []int       `json:"pids"`
	PySpy     []StackDump `json:"py_spy,omitempty"`
	NvidiaSMI string      `json:"nvidia_smi,omitempty"`
	Notes     []string    `json:"notes,omitempty"`
}

// StackDump is py-spy's dump of one process.
type StackDump struct {
	PID    int    `json:"pid"`
	Output string `json:"output"`
}
