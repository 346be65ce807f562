//go:build linux

package launcher

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/record"
)

// countErrKinds counts the observations that timed out and those not sent,
// checking that each one not sent says why.
func countErrKinds(t *testing.T, obs []evidence.Observation, why string) (timeouts, notSent int) {
	t.Helper()
	for _, o := range obs {
		switch o.ErrKind {
		case evidence.Timeout:
			timeouts++
		case evidence.Aborted:
			notSent++
			if !strings.Contains(o.Err, why) {
				t.Errorf("%s not sent: %q, want it to say %q", o.Probe, o.Err, why)
			}
		}
	}
	return timeouts, notSent
}

// probeVerdict is the verdict the cell's judgement gives the named probe.
func probeVerdict(r record.Result, name string) classify.Verdict {
	for _, p := range r.Probes {
		if p.Name == name {
			return p.Verdict
		}
	}
	return ""
}

// TestWedgeAfterAnAnswerIsAHang: a real sim-server that answers its first
// generation and then never answers again is a hang as soon as one probe
// times out; the probes after it are not sent, so the probing costs one
// probe_timeout, not one per probe left.
func TestWedgeAfterAnAnswerIsAHang(t *testing.T) {
	t.Parallel()
	profile := filepath.Join(t.TempDir(), "wedge.toml")
	if err := os.WriteFile(profile, []byte("name = \"wedge\"\ndescription = \"wedges after one answer\"\nstartup = \"300ms\"\n[[rule]]\nbehaviour = \"wedge\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const probeTimeout = 2 * time.Second
	sw, cells := newSweep(t, fmt.Sprintf(`[server]
command = ["{self}", "sim-server", "--model-path", "/m", "--host", "{host}", "--port", "{port}", "--sim-profile", %q]
env = { BMX_LAUNCHER_HELPER = "sim" }
ready_timeout = "20s"
probe_timeout = %q
stop_grace = "2s"
[[axis]]
name = "moe"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass"]
`, profile, probeTimeout))
	r, err := sw.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Hang || !r.TimedOut {
		log, _ := os.ReadFile(r.LogPath)
		t.Fatalf("verdict %s (%s), timed out %v\nlog:\n%.3000s", r.Verdict, r.Reason, r.TimedOut, log)
	}
	// model-info and say-ok answer; math (the second generation) times out
	// and is the hang's evidence; the rest is not sent.
	if v := probeVerdict(r, "say-ok"); v != classify.Correct {
		t.Errorf("say-ok %s: the server answered it before it wedged", v)
	}
	if v := probeVerdict(r, "math"); v != classify.Hang {
		t.Errorf("math %s, want hang: it is the probe that timed out", v)
	}
	timeouts, notSent := countErrKinds(t, r.Observations, "timed out after the server had answered")
	set := probe.Smoke()
	want := 0
	for _, p := range set.Probes[3:] {
		want += len(p.Requests)
	}
	if timeouts != 1 || notSent != want {
		t.Errorf("%d timeouts, %d not sent of %d observations; want 1 and %d", timeouts, notSent, len(r.Observations), want)
	}
	ratio := float64(r.Timings.ProbesMS) / float64(probeTimeout.Milliseconds())
	t.Logf("probing took %d ms, %.2fx probe_timeout", r.Timings.ProbesMS, ratio)
	if ratio >= 3 {
		t.Errorf("probing took %.2fx probe_timeout: bmx waited again after the first timeout", ratio)
	}
}

// TestProbeServerStopsAtTheFirstTimeout: `bmx probe` against a server that
// answers one request and then none (not even the model list) waits out one
// probe_timeout: the model-name lookup that times out counts as the probe's
// timeout, and nothing after it is sent.
func TestProbeServerStopsAtTheFirstTimeout(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			// The body read to its end, the context ends when the client
			// gives up and closes the connection.
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		if r.URL.Path != "/get_model_info" {
			t.Errorf("first request %s %s, want the model info", r.Method, r.URL.Path)
		}
		fmt.Fprint(w, `{"model_path":"/m"}`)
	}))
	defer srv.Close()
	const timeout = time.Second
	client := &probe.Client{BaseURL: srv.URL, Timeout: timeout}
	start := time.Now()
	j, obs := ProbeServer(context.Background(), client, probe.Smoke())
	took := time.Since(start)
	if j.Verdict != classify.Hang {
		t.Fatalf("verdict %s (%s), want hang", j.Verdict, j.Reason)
	}
	timeouts, notSent := countErrKinds(t, obs, "timed out and the server had generated nothing")
	if timeouts != 1 || notSent != len(obs)-2 || requests.Load() != 2 {
		t.Errorf("%d timeouts, %d not sent of %d observations, %d requests; want 1, %d, 2", timeouts, notSent, len(obs), requests.Load(), len(obs)-2)
	}
	t.Logf("took %v, %.2fx the probe timeout", took, took.Seconds()/timeout.Seconds())
	if took >= 3*timeout {
		t.Errorf("took %v with a %v timeout: bmx waited again after the first timeout", took, timeout)
	}
}
