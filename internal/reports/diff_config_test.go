package reports

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/record"
)

// TestConfigDiffUnreadable: a recorded config this bmx cannot read is
// compared line by line, and says so; a probe file whose content run.json
// does not hold is named as not compared.
func TestConfigDiffUnreadable(t *testing.T) {
	good := "[server]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n\n[[axis]]\nname = \"a\"\nflag = \"--a\"\nvalues = [\"x\", \"y\"]\n"
	base := &record.Run{Name: "old", ConfigPath: "m.toml", Config: "no_such_key = 1 # an older bmx's key\n" + good, ProbeSet: "/cfg/probes.toml",
		Axes: []record.AxisValues{{Name: "a", Values: []string{"x", "y"}}}}
	next := &record.Run{Name: "new", ConfigPath: "m.toml", Config: "retries = 2\n" + good, ProbeSet: "/cfg/probes.toml",
		Axes: []record.AxisValues{{Name: "a", Values: []string{"x", "y"}}}}
	changes, notes := configChanges(base, next)
	var got []string
	for _, c := range changes {
		got = append(got, c.String())
	}
	want := []string{"config: text: - no_such_key = 1 # an older bmx's key", "config: text: + retries = 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "the config of old cannot be read") || !strings.Contains(notes[1], "does not record its content") {
		t.Errorf("notes: %q", notes)
	}
	// Both readable: only the retries key differs.
	base.Config = good
	changes, notes = configChanges(base, next)
	if len(changes) != 1 || changes[0].String() != "config: retries: 0 -> 2" || len(notes) != 1 {
		t.Errorf("changes %v, notes %q", changes, notes)
	}
}
