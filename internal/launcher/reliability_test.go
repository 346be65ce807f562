//go:build linux

package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestHungGenerationStopsProbing: a server that is up but never generates
// is a hang after the first probe that times out; the probes after it are
// not sent.
func TestHungGenerationStopsProbing(t *testing.T) {
	t.Parallel()
	sw, cell := sweepFor(t, "no-generate", `ready_timeout = "20s"`+"\nprobe_timeout = \"1s\"\nstop_grace = \"1s\"")
	r, err := sw.RunCell(context.Background(), "", cell, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Hang || !r.TimedOut {
		t.Fatalf("verdict %s (%s), timed out %v", r.Verdict, r.Reason, r.TimedOut)
	}
	var timeouts, notSent int
	for _, o := range r.Observations {
		switch o.ErrKind {
		case evidence.Timeout:
			timeouts++
		case evidence.Aborted:
			notSent++
			if !strings.Contains(o.Err, "timed out and the server had generated nothing") {
				t.Errorf("%s: %q", o.Probe, o.Err)
			}
		}
	}
	set := probe.Smoke()
	// model-info answers, say-ok times out, the rest is not sent.
	if timeouts != 1 || notSent != len(set.Probes)-2+len(set.Probes[4].Requests)-1 {
		t.Errorf("%d timeouts, %d not sent, of %d observations", timeouts, notSent, len(r.Observations))
	}
}

// TestCellDeadline: the cell's one deadline ends a readiness that the ready
// timeout would let run on.
func TestCellDeadline(t *testing.T) {
	t.Parallel()
	sw, cell := sweepFor(t, "stuck-ignore-term", `ready_timeout = "10m"`+"\ncell_timeout = \"1s\"\nstop_grace = \"200ms\"")
	r, err := sw.RunCell(context.Background(), "", cell, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Hang || !strings.Contains(strings.Join(r.Problems, "\n"), "cell_timeout 1s") {
		t.Errorf("verdict %s (%s), problems %q", r.Verdict, r.Reason, r.Problems)
	}
}

// TestFatalLineAsProbesEnd: a server that logs a fatal line while it
// answers the last probe, and lives on, is a crash: the line is not lost
// between the log watcher's reads and the end of the probes.
func TestFatalLineAsProbesEnd(t *testing.T) {
	t.Parallel()
	for range 5 { // the race, when it was one, lost the line most times
		sw, cell := sweepFor(t, "fatal-on-chat", `ready_timeout = "20s"`+"\nstop_grace = \"1s\"")
		sw.Probes = probe.Set{Probes: []probe.Probe{probe.Chat("say-ok", "Say 'OK'", &evidence.Expect{Contains: "OK"}, 8, 1)}}
		r, err := sw.RunCell(context.Background(), "", cell, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != classify.Crash || !strings.Contains(r.Fatal, "Scheduler hit an exception") {
			t.Fatalf("verdict %s (%s), fatal %q", r.Verdict, r.Reason, r.Fatal)
		}
	}
}

// TestHugeReply: a server that answers 10 MB costs results.jsonl tens of
// KiB: the observation keeps the reply's head and tail and its full size.
func TestHugeReply(t *testing.T) {
	t.Parallel()
	sw, cell := sweepFor(t, "huge-reply", `ready_timeout = "20s"`+"\nstop_grace = \"1s\"")
	sw.Probes = probe.Set{Probes: []probe.Probe{probe.Chat("say-ok", "Say 'OK'", &evidence.Expect{Contains: "OK"}, 8, 1)}}
	results, err := sw.Run(context.Background(), []matrix.Cell{cell})
	if err != nil || len(results) != 1 {
		t.Fatal(err, len(results))
	}
	o := results[0].Observations[0]
	if o.TextBytes < 10<<20 || len(o.Text) > evidence.KeepHead+evidence.KeepTail+256 {
		t.Errorf("kept %d bytes of a %d-byte reply", len(o.Text), o.TextBytes)
	}
	st, err := os.Stat(filepath.Join(sw.Dir, record.ResultsFile))
	if err != nil || st.Size() > 256<<10 {
		t.Errorf("results.jsonl: %v bytes (%v)", st.Size(), err)
	}
}
