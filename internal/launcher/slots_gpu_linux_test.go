package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// The tests in this file sweep whole sessions on the fake multi-GPU host of
// fakegpu_linux_test.go and check, from its timeline and the run's records,
// where each cell ran and what it left behind.

// fakeHost is a fake multi-GPU host for one session.
type fakeHost struct {
	dir string
	// env is added to its servers' environment (FAKE_BARRIER).
	env map[string]string
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{dir: t.TempDir()}
}

// config is a matrix of cells named c01, c02, ... (and the special values
// given, in order after the first plain cell) on slots (nil: the config
// has none), with the fake nvidia-smi and servers. freeTimeout bounds the
// GPU wait.
func (h *fakeHost) config(t *testing.T, cells int, special []string, slots []string, freeTimeout string) string {
	t.Helper()
	smi := fakeGPUProgram(t)
	matrixtest.Profile{Name: "fake-h200", Startup: "300ms"}.Write(t, filepath.Join(h.dir, "fast.toml"))
	// Two probes with expectations and no performance probe: the cells are
	// about where they run, not how fast.
	matrixtest.WriteFile(t, filepath.Join(h.dir, "probes.toml"), `[[probe]]
name = "ok"
prompt = "Say 'OK'"
expect = { contains = "OK" }
[[probe]]
name = "sum"
prompt = "What is 300+23?"
expect = { number = 323 }
[perf]
enabled = false
`)
	values := []string{`"c01"`}
	values = append(values, special...)
	for i := 2; i <= cells; i++ {
		values = append(values, fmt.Sprintf(`"c%02d"`, i))
	}
	var tail strings.Builder
	fmt.Fprintf(&tail, "[[axis]]\nname = \"cell\"\nenv = \"CELL\"\nvalues = [%s]\n", strings.Join(values, ", "))
	fmt.Fprintf(&tail, "[gpu]\nsmi = [%q, %q, \"--fake-gpus=%d\"]\nbusy_mib = 1024\nfree_timeout = %q\n",
		smi, "--fake-dir="+h.dir, fakeGPUCount, freeTimeout)
	for _, s := range slots {
		fmt.Fprintf(&tail, "[[slot]]\ngpus = %q\n", s)
	}
	tail.WriteString("[probes]\nfile = \"probes.toml\"\n")
	env := map[string]string{"BMX_LAUNCHER_HELPER": "gpu-sim", "FAKE_GPU_DIR": h.dir, "FAKE_GPUS": strconv.Itoa(fakeGPUCount),
		"SLOT_GPUS": "{gpus}", "SLOT_NGPUS": "{ngpus}"}
	maps.Copy(env, h.env)
	return matrixtest.Config{
		Name: "gpus", Head: `order = "file"`,
		Server: matrixtest.Server{
			Command:      matrixtest.Sim("--tp", "{ngpus}", "--sim-profile", "{dir}/fast.toml"),
			Env:          env,
			ReadyTimeout: "30s", StopGrace: "2s",
		},
		Tail: tail.String(),
	}.Write(t, filepath.Join(h.dir, "gpus.toml"))
}

// sweep runs a whole session of config on the fake host; slots is --slots.
func (h *fakeHost) sweep(t *testing.T, config string, slots int) (*record.Report, time.Duration) {
	t.Helper()
	s := newTestSession(t, config)
	s.Slots, s.KeepGoing = slots, true
	t0 := time.Now()
	out := s.mustRun(t)
	return out.Report, time.Since(t0)
}

// timeline reads the fake host's timeline.
func (h *fakeHost) timeline(t *testing.T) []gpuEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(h.dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []gpuEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e gpuEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("timeline line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

// span is one server's life on the fake host, from the timeline.
type span struct {
	cell       string
	pid        int
	start, end time.Time
	ev         gpuEvent // the start event
}

// hold is a leaky cell's detached child's memory on one GPU, from its
// allocation until the first look that found it released (the zero time
// when none did).
type hold struct {
	ev    gpuEvent
	until time.Time
}

// spans reads the timeline and pairs each server's start with its end,
// failing the test for a server that never recorded its end, and returns
// the holds and conflicts apart.
func (h *fakeHost) spans(t *testing.T) (servers []span, holds []hold, conflicts []gpuEvent) {
	t.Helper()
	evs := h.timeline(t)
	open := map[int]*span{}
	for _, e := range evs {
		switch e.Kind {
		case "start":
			open[e.PID] = &span{cell: e.Cell(), pid: e.PID, start: e.Time(), ev: e}
		case "end":
			s, ok := open[e.PID]
			if !ok {
				t.Fatalf("end of pid %d without a start", e.PID)
			}
			s.end = e.Time()
			servers = append(servers, *s)
			delete(open, e.PID)
		case "hold":
			hd := hold{ev: e}
			if path := filepath.Join(h.dir, "released."+strconv.Itoa(e.PID)); fileExists(path) {
				hd.until = readTime(path, time.Time{})
			}
			holds = append(holds, hd)
		case "conflict":
			conflicts = append(conflicts, e)
		}
	}
	for pid, s := range open {
		t.Errorf("server %d (%s) recorded no end: it did not shut down through its own SIGTERM handler", pid, s.cell)
	}
	slices.SortFunc(servers, func(a, b span) int { return a.start.Compare(b.start) })
	return servers, holds, conflicts
}

// checkNoSharing fails the test if two servers' lives overlap on one GPU
// (their CUDA_VISIBLE_DEVICES), or a server started on a GPU while a
// leaky cell's memory was still held there, or any server found memory
// held on its GPUs as it started.
func checkNoSharing(t *testing.T, servers []span, holds []hold, conflicts []gpuEvent) {
	t.Helper()
	for _, c := range conflicts {
		t.Errorf("%s (pid %d, CUDA_VISIBLE_DEVICES=%s) started on a held GPU: %s", c.Cell(), c.PID, c.CVD, c.Detail)
	}
	for i, a := range servers {
		for _, b := range servers[i+1:] {
			shared := slices.ContainsFunc(strings.Split(a.ev.CVD, ","), func(g string) bool {
				return slices.Contains(strings.Split(b.ev.CVD, ","), g)
			})
			if shared && b.start.Before(a.end) && a.start.Before(b.end) {
				t.Errorf("%s (GPUs %s, %s-%s) and %s (GPUs %s, %s-%s) ran on one GPU at once", a.cell, a.ev.CVD,
					a.start.Format("05.000"), a.end.Format("05.000"), b.cell, b.ev.CVD, b.start.Format("05.000"), b.end.Format("05.000"))
			}
		}
	}
	for _, h := range holds {
		for _, s := range servers {
			if s.cell != h.ev.Cell() && slices.Contains(strings.Split(s.ev.CVD, ","), h.ev.CVD) &&
				s.start.After(h.ev.Time()) && (h.until.IsZero() || s.start.Before(h.until)) {
				t.Errorf("%s started on GPU %s at %s while %s's leaked memory was held there (until %s)", s.cell, h.ev.CVD,
					s.start.Format("05.000"), h.ev.Cell(), h.until.Format("05.000"))
			}
		}
	}
}

// howRan says, for a failure's message, how each cell ended and how many
// servers the timeline has of it.
func howRan(rep *record.Report, servers []span) string {
	n := map[string]int{}
	for _, s := range servers {
		n[s.cell]++
	}
	var b strings.Builder
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "%s on slot %s: %s (%s), %d servers, problems %q, exit %+v, log tail %q\n", r.Cell.ID, r.Slot, r.Verdict, r.Reason, n[r.Cell.ID], r.Problems, r.Exit, r.LogTail)
	}
	return b.String()
}

// peak is the most servers up at once.
func peak(servers []span) int {
	most := 0
	for _, a := range servers {
		n := 0
		for _, b := range servers {
			if !b.start.After(a.start) && b.end.After(a.start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// byCell indexes a report's results by cell ID.
func byCell(rep *record.Report) map[string]record.Result {
	m := map[string]record.Result{}
	for _, r := range rep.Results {
		m[r.Cell.ID] = r
	}
	return m
}

// checkServersSawTheirSlot fails the test unless each server's
// CUDA_VISIBLE_DEVICES, {gpus} and {ngpus} are its result's slot, and
// each result has exactly one server, and one more for each start lost to
// another process taking its port first (portRaces): the other test
// packages' servers pick ports from the same range.
func checkServersSawTheirSlot(t *testing.T, rep *record.Report, servers []span) {
	t.Helper()
	results := byCell(rep)
	seen := map[string]int{}
	for _, s := range servers {
		seen[s.cell]++
		r, ok := results[s.cell]
		if !ok {
			t.Errorf("server %d's cell %q has no result", s.pid, s.cell)
			continue
		}
		n := strconv.Itoa(strings.Count(r.Slot, ",") + 1)
		if s.ev.CVD != r.Slot || s.ev.GPUs != r.Slot || s.ev.NGPUs != n || s.ev.TP != n {
			t.Errorf("%s ran on slot %q (%s GPUs) but its server saw CUDA_VISIBLE_DEVICES=%q {gpus}=%q {ngpus}=%q --tp %q",
				s.cell, r.Slot, n, s.ev.CVD, s.ev.GPUs, s.ev.NGPUs, s.ev.TP)
		}
	}
	for id, r := range results {
		if want := 1 + portRaces(r); r.Verdict != classify.Skipped && seen[id] != want {
			t.Errorf("%s (%s): %d servers, want %d", id, r.Verdict, seen[id], want)
		}
	}
}

// portRaces is how many times r's cell started again because another
// process took its server's port first (see Sweep.runOnFreePort).
func portRaces(r record.Result) int {
	n := 0
	for _, p := range r.Problems {
		if strings.Contains(p, "the port was taken before the server bound it") {
			n++
		}
	}
	return n
}

// problems are r's problems other than lost port races (portRaces).
func problems(r record.Result) []string {
	var out []string
	for _, p := range r.Problems {
		if !strings.Contains(p, "the port was taken before the server bound it") {
			out = append(out, p)
		}
	}
	return out
}

// slotCounts is how many results each slot has.
func slotCounts(rep *record.Report) map[string]int {
	m := map[string]int{}
	for _, r := range rep.Results {
		m[r.Slot]++
	}
	return m
}

// TestGPUSlotsOnePerGPU: one slot per GPU of a 4-GPU host, 16 cells: the
// cells run four at a time, each server sees only its slot's GPU, and no
// two servers are ever on one GPU at once.
func TestGPUSlotsOnePerGPU(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.env = map[string]string{"FAKE_BARRIER": "4"}
	rep, wall := h.sweep(t, h.config(t, 16, nil, []string{"0", "1", "2", "3"}, "10s"), 0)
	servers, holds, conflicts := h.spans(t)
	// One more server for each start lost to another process taking its
	// port first (the other packages' servers pick from the same range).
	races := 0
	for _, r := range rep.Results {
		races += portRaces(r)
	}
	if len(rep.Results) != 16 || len(servers) != 16+races {
		t.Fatalf("%d results, %d servers, want 16 results and %d servers (%d lost port races):\n%s", len(rep.Results), len(servers), 16+races, races, howRan(rep, servers))
	}
	for _, r := range rep.Results {
		if r.Verdict != classify.Correct || len(problems(r)) > 0 {
			t.Errorf("%s on slot %s: %s (%s), problems %q", r.Cell.ID, r.Slot, r.Verdict, r.Reason, r.Problems)
		}
	}
	checkServersSawTheirSlot(t, rep, servers)
	checkNoSharing(t, servers, holds, conflicts)
	for _, g := range []string{"0", "1", "2", "3"} {
		if n := slotCounts(rep)[g]; n < 3 {
			t.Errorf("slot %s ran %d cells, want at least 3 (by slot: %v)", g, n, slotCounts(rep))
		}
	}
	if p := peak(servers); p != 4 {
		t.Errorf("at most %d servers were up at once, want 4 (one per slot)", p)
	}
	t.Logf("16 cells on 4 one-GPU slots in %s: by slot %v", wall.Round(time.Millisecond), slotCounts(rep))
}

// TestGPUSlotsLeakHoldsItsSlot: a cell whose detached child leaves 9000 MiB
// on its GPU after its server is gone holds that slot back until the GPU
// is free, while the other slots keep starting cells (the memory is
// released once two have started elsewhere and 1 s has passed, or after
// 20 s: a sweep that held every slot for it fails here after 20 s, however
// slow the machine);
// its result names the GPU and the memory, and the child does not outlive
// the sweep.
func TestGPUSlotsLeakHoldsItsSlot(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	leak := `{ name = "leak", env = { FAKE_ROLE = "leak", FAKE_HOLD = "20s", FAKE_HOLD_STARTS = "2" } }`
	// 24 cells: a loaded machine started 9 on the other slots while the
	// memory was held; some must be left to start on its GPU after it.
	rep, _ := h.sweep(t, h.config(t, 24, []string{leak}, []string{"0", "1", "2", "3"}, "30s"), 0)
	servers, holds, conflicts := h.spans(t)
	checkServersSawTheirSlot(t, rep, servers)
	checkNoSharing(t, servers, holds, conflicts)
	if len(holds) != 1 {
		t.Fatalf("%d holds in the timeline, want the leaky cell's one", len(holds))
	}
	hd := holds[0]
	results := byCell(rep)
	leaker := results["cell=leak"]
	if hd.ev.Cell() != "cell=leak" || hd.ev.CVD != leaker.Slot || hd.until.IsZero() {
		t.Fatalf("hold %+v until %s, leaky cell on slot %q", hd.ev, hd.until, leaker.Slot)
	}
	want := fmt.Sprintf("GPU memory was still held when the server's processes were gone (GPU %s: %d MiB)", leaker.Slot, fakeLeakMiB)
	if !slices.ContainsFunc(leaker.Problems, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("the leaky cell's problems do not name its GPU and memory (%q):\n%s", want, strings.Join(leaker.Problems, "\n"))
	}
	if !slices.ContainsFunc(leaker.Problems, func(p string) bool { return strings.Contains(p, "left the server's process group") }) {
		t.Errorf("the leaky cell's problems do not name the escaped child:\n%s", strings.Join(leaker.Problems, "\n"))
	}
	if processLives(hd.ev.PID) {
		syscall.Kill(hd.ev.PID, syscall.SIGKILL)
		t.Errorf("the detached child %d outlived the sweep", hd.ev.PID)
	}
	until := hd.until
	var leakEnd time.Time
	nextOnGPU, othersDuring := time.Time{}, 0
	for _, s := range servers {
		switch {
		case s.cell == "cell=leak":
			leakEnd = s.end
		case s.ev.CVD == leaker.Slot && s.start.After(hd.ev.Time()) && (nextOnGPU.IsZero() || s.start.Before(nextOnGPU)):
			nextOnGPU = s.start
		}
	}
	for _, s := range servers {
		if s.ev.CVD != leaker.Slot && s.start.After(leakEnd) && s.start.Before(until) {
			othersDuring++
		}
	}
	if nextOnGPU.IsZero() || nextOnGPU.Before(until) {
		t.Errorf("the next cell on GPU %s started at %s, want after the leak's memory was free at %s",
			leaker.Slot, nextOnGPU.Format("05.000"), until.Format("05.000"))
	}
	if othersDuring == 0 {
		t.Errorf("no cell started on another slot while GPU %s was held (%s-%s): the leak held up every slot",
			leaker.Slot, leakEnd.Format("05.000"), until.Format("05.000"))
	}
	for id, r := range results {
		if id != "cell=leak" && (r.Verdict != classify.Correct || len(problems(r)) > 0) {
			t.Errorf("%s on slot %s: %s (%s), problems %q", id, r.Slot, r.Verdict, r.Reason, r.Problems)
		}
	}
	t.Logf("GPU %s held by the leak until %s after its server's end; %d cells started on the other slots meanwhile; the leak's problems: %q",
		leaker.Slot, until.Sub(leakEnd).Round(time.Millisecond), othersDuring, leaker.Problems)
}

// TestGPUSlotsLeakOutlastsTimeout: memory still held when the free timeout
// has passed skips the cell that would start on that slot, and its reason
// names the GPU and the cell that left it held; the other slots' cells run.
func TestGPUSlotsLeakOutlastsTimeout(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	leak := `{ name = "leak", env = { FAKE_ROLE = "leak", FAKE_HOLD = "1h" } }`
	// 20 cells: the other three slots need about 2 s for the 18 after the
	// leak (300 ms a start), longer than the leak's cell and its 1 s wait,
	// so cells are left for the held slot to take; with 10, a quiet host
	// ran them all on the others first and no cell was skipped.
	rep, _ := h.sweep(t, h.config(t, 20, []string{leak}, []string{"0", "1", "2", "3"}, "1s"), 0)
	servers, _, conflicts := h.spans(t)
	checkServersSawTheirSlot(t, rep, servers)
	checkNoSharing(t, servers, nil, conflicts)
	results := byCell(rep)
	leaker := results["cell=leak"]
	want := fmt.Sprintf("GPU memory still held 1s after teardown: GPU %s: %d MiB", leaker.Slot, fakeLeakMiB)
	if !slices.ContainsFunc(leaker.Problems, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("the leaky cell's problems do not say %q:\n%s", want, strings.Join(leaker.Problems, "\n"))
	}
	skipped := 0
	for id, r := range results {
		switch {
		case id == "cell=leak":
		case r.Verdict == classify.Skipped:
			skipped++
			if r.Slot != leaker.Slot || !strings.Contains(r.Reason, fmt.Sprintf("GPU %s: %d MiB", leaker.Slot, fakeLeakMiB)) ||
				!strings.Contains(r.Reason, "cell=leak") {
				t.Errorf("%s skipped on slot %s: %s; want the leak's slot %s, its GPU and the cell that left it held",
					id, r.Slot, r.Reason, leaker.Slot)
			}
		case r.Verdict != classify.Correct:
			t.Errorf("%s on slot %s: %s (%s)", id, r.Slot, r.Verdict, r.Reason)
		}
	}
	if skipped == 0 {
		t.Error("no cell was skipped on the held slot")
	}
}

// TestGPUSlotsTwoGPUSlot: a slot of two GPUs runs beside one-GPU slots: its
// servers see both GPUs, {gpus} "0,1" and {ngpus} 2, take memory on both,
// and share neither with a one-GPU slot's server. Six cells: the first
// three meet at the barrier, one on each slot, and three more start on
// GPUs a server has just left.
func TestGPUSlotsTwoGPUSlot(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.env = map[string]string{"FAKE_BARRIER": "3"}
	rep, _ := h.sweep(t, h.config(t, 6, nil, []string{"0,1", "2", "3"}, "10s"), 0)
	servers, holds, conflicts := h.spans(t)
	checkServersSawTheirSlot(t, rep, servers)
	checkNoSharing(t, servers, holds, conflicts)
	for _, r := range rep.Results {
		if r.Verdict != classify.Correct || len(problems(r)) > 0 {
			t.Errorf("%s on slot %s: %s (%s), problems %q", r.Cell.ID, r.Slot, r.Verdict, r.Reason, r.Problems)
		}
	}
	counts := slotCounts(rep)
	if counts["0,1"] == 0 || counts["2"] == 0 || counts["3"] == 0 {
		t.Fatalf("by slot %v: every slot should run cells", counts)
	}
	beside := false
	for _, a := range servers {
		for _, b := range servers {
			if a.ev.CVD == "0,1" && b.ev.CVD != "0,1" && a.start.Before(b.end) && b.start.Before(a.end) {
				beside = true
			}
		}
	}
	if !beside {
		t.Error("no two-GPU cell ran at the same time as a one-GPU cell")
	}
	for _, s := range servers {
		if s.ev.CVD != "0,1" {
			continue
		}
		log, _ := os.ReadFile(byCell(rep)[s.cell].LogPath)
		if !strings.Contains(string(log), "took 4000 MiB on GPU 0, 1") {
			t.Errorf("%s's server did not take memory on both GPUs:\n%.500s", s.cell, log)
		}
	}
}

// TestGPUSlotsFromSlotsFlag: --slots N on a host that nvidia-smi says has
// four GPUs splits them in order, "0,1" and "2,3" for 2; with bmx's own
// CUDA_VISIBLE_DEVICES set (as Slurm sets it), only those GPUs are split,
// and each server sees its slot's, not bmx's. GPUs named by UUID cannot be
// matched to nvidia-smi's indexes: the cells run, unchecked, and the run
// says so, instead of every slot waiting on GPU 0 (which something outside
// the sweep holds here). bmx's CUDA_VISIBLE_DEVICES is this process's
// environment, so each case runs in a test process of its own with it set
// (runInOwnProcess), and the cases run beside the other tests. Each case
// sweeps one cell per slot: every slot starts one at once, the held one
// included.
func TestGPUSlotsFromSlotsFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cvd string
		slots     int
		want      []string
		note      string
	}{
		{name: "two slots of two", slots: 2, want: []string{"0,1", "2,3"}},
		{name: "four slots", slots: 4, want: []string{"0", "1", "2", "3"}},
		{name: "CUDA_VISIBLE_DEVICES 1,3", cvd: "1,3", slots: 2, want: []string{"1", "3"}},
		{name: "CUDA_VISIBLE_DEVICES by UUID", cvd: "GPU-aaaa,GPU-bbbb", slots: 2, want: []string{"GPU-aaaa", "GPU-bbbb"},
			note: `GPU check failed: slot GPU "GPU-aaaa" is not an nvidia-smi index`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if runInOwnProcess(t, "CUDA_VISIBLE_DEVICES="+tt.cvd, fakeGPUProgramEnv+"="+fakeGPUProgram(t)) {
				return
			}
			h := newFakeHost(t)
			if err := allocate(h.dir, "0", os.Getpid(), 5000, 0, 0); err != nil { // not the sweep's
				t.Fatal(err)
			}
			rep, _ := h.sweep(t, h.config(t, tt.slots, nil, nil, "1s"), tt.slots)
			if !slices.Equal(rep.Run.Slots, tt.want) {
				t.Errorf("run.json's slots %q, want %q", rep.Run.Slots, tt.want)
			}
			if got := slotCounts(rep); len(got) != tt.slots {
				t.Errorf("cells by slot %v: want one on each of %q", got, tt.want)
			}
			servers, holds, conflicts := h.spans(t)
			checkServersSawTheirSlot(t, rep, servers)
			checkNoSharing(t, servers, holds, nil)
			for _, c := range conflicts {
				if c.CVD != "0" && !strings.HasPrefix(c.CVD, "0,") {
					t.Errorf("%s (CUDA_VISIBLE_DEVICES=%s) started on a held GPU: %s", c.Cell(), c.CVD, c.Detail)
				}
			}
			for _, r := range rep.Results {
				wantVerdict := classify.Correct
				if strings.HasPrefix(r.Slot, "0") {
					wantVerdict = classify.Skipped // GPU 0 is held by the test
				}
				if r.Verdict != wantVerdict || !slices.Contains(tt.want, r.Slot) {
					t.Errorf("%s on slot %q: %s (%s), want %s; problems %q; log tail %q", r.Cell.ID, r.Slot, r.Verdict, r.Reason, wantVerdict, r.Problems, r.LogTail)
				}
				if r.Verdict == classify.Skipped && !strings.Contains(r.Reason, "GPU 0: 5000 MiB") {
					t.Errorf("%s skipped on slot %q: %s", r.Cell.ID, r.Slot, r.Reason)
				}
			}
			if hasNote := slices.ContainsFunc(rep.Run.Notes, func(n string) bool { return strings.Contains(n, tt.note) }); tt.note != "" && !hasNote {
				t.Errorf("run notes %q lack %q", rep.Run.Notes, tt.note)
			}
		})
	}
}

// TestGPUSlotsCrashOnOneGPU: a server that dies of CUDA out-of-memory on
// one GPU is a crash of its own cell only: the servers up on the other
// GPUs at that moment answer their probes and end correct, and the crashed
// cell's slot runs its next cell (its memory went with its process).
func TestGPUSlotsCrashOnOneGPU(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	oom := `{ name = "oom", env = { FAKE_ROLE = "oom" } }`
	rep, _ := h.sweep(t, h.config(t, 12, []string{oom}, []string{"0", "1", "2", "3"}, "10s"), 0)
	servers, holds, conflicts := h.spans(t)
	checkServersSawTheirSlot(t, rep, servers)
	checkNoSharing(t, servers, holds, conflicts)
	results := byCell(rep)
	crashed := results["cell=oom"]
	if crashed.Verdict != classify.Crash || !strings.Contains(crashed.Signature, "CUDA out of memory") {
		t.Errorf("the oom cell: %s, signature %q", crashed.Verdict, crashed.Signature)
	}
	if len(crashed.Problems) > 0 {
		t.Errorf("the oom cell's memory went with its process, yet: %q", crashed.Problems)
	}
	var died time.Time
	for _, s := range servers {
		if s.cell == "cell=oom" {
			died = s.end
		}
	}
	beside, after := 0, 0
	for _, s := range servers {
		if s.cell == "cell=oom" {
			continue
		}
		if s.start.Before(died) && s.end.After(died) {
			beside++
		}
		if s.ev.CVD == crashed.Slot && s.start.After(died) {
			after++
		}
	}
	if beside == 0 {
		t.Error("no server was up on another GPU when the oom cell died")
	}
	if after == 0 {
		t.Errorf("no cell ran on the oom cell's slot %s after it", crashed.Slot)
	}
	for id, r := range results {
		if id != "cell=oom" && (r.Verdict != classify.Correct || len(problems(r)) > 0) {
			t.Errorf("%s on slot %s: %s (%s), problems %q", id, r.Slot, r.Verdict, r.Reason, r.Problems)
		}
	}
	t.Logf("%d servers were up on the other GPUs when the oom cell died on GPU %s", beside, crashed.Slot)
}

// TestGPUSlotsNameMissingGPU: [[slot]]s written for a larger host than this
// one (GPU 4 of four, or GPU 0 when bmx may use 2 and 3 only) are refused
// before any server starts, naming the slot, the GPU and the GPUs there are.
func TestGPUSlotsNameMissingGPU(t *testing.T) {
	tests := []struct {
		name, cvd string
		slots     []string
		want      string
	}{
		{"GPU 4 of four", "", []string{"0,1", "2", "4"}, `slot #3 (gpus = "4") names GPU 4, but this host shows GPUs 0,1,2,3`},
		{"outside CUDA_VISIBLE_DEVICES", "2,3", []string{"2", "0"}, `slot #2 (gpus = "0") names GPU 0, but this host shows GPUs 2,3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CUDA_VISIBLE_DEVICES", tt.cvd)
			h := newFakeHost(t)
			s := newTestSession(t, h.config(t, 2, nil, tt.slots, "1s"))
			out, err := s.run(t.Context())
			var cerr *ConfigError
			if !errors.As(err, &cerr) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want a *ConfigError saying %q", err, tt.want)
			}
			if out != nil {
				t.Errorf("a run directory was made: %s", out.Dir)
			}
			if _, err := os.Stat(filepath.Join(h.dir, "timeline.jsonl")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a server started: %v", err)
			}
		})
	}
}
