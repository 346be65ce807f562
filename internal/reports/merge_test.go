package reports

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

const mergeConfig = `name = "m"
reference = { a = "1", b = "x" }
[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "a"
flag = "--a"
values = ["1", "2", "3"]
[[axis]]
name = "b"
flag = "--b"
values = ["x", "y"]
`

// shardRun is one shard of mergeConfig as a sweep would leave it: run.json,
// shard.json, results.jsonl with a verdict per cell (cells not in verdicts
// did not finish), and a log per cell.
type shardRun struct {
	shard    matrix.Shard
	host     record.Host
	config   string
	vars     map[string]string
	verdicts map[string]classify.Verdict // by cell ID; "" = every cell of the shard correct
	ended    time.Time
	answer   string // when set, every cell answered a greedy probe without an expectation so
}

func writeShardRun(t *testing.T, dir string, s shardRun) string {
	t.Helper()
	if s.config == "" {
		s.config = mergeConfig
	}
	cfg, err := matrix.Parse("m.toml", []byte(mergeConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	a := plan.KeepShard(s.shard)
	run := &record.Run{Name: "m", Config: s.config, Vars: s.vars, ProbeSet: "smoke", Reference: plan.Reference,
		Cells: len(plan.Cells), Host: s.host, BMXVersion: "test", Started: s.ended.Add(-time.Minute), Ended: s.ended,
		Axes: []record.AxisValues{{Name: "a", Values: []string{"1", "2", "3"}}, {Name: "b", Values: []string{"x", "y"}}}}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteShard(dir, record.ShardRecord{Shard: s.shard, Assignment: a}); err != nil {
		t.Fatal(err)
	}
	store, err := record.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i, c := range plan.Cells {
		v := classify.Correct
		if s.verdicts != nil {
			var ok bool
			if v, ok = s.verdicts[c.ID]; !ok {
				continue
			}
		}
		log := filepath.Join(dir, "logs", c.ID+".log")
		if err := os.WriteFile(log, []byte("log of "+c.ID+" on "+s.host.Hostname+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := record.Result{Cell: c, Verdict: v, Reason: "test", LogPath: log, Ended: s.ended.Add(time.Duration(i) * time.Second)}
		if s.answer == "" && c.ID == "a=3,b=y" { // evidence a merge keeps whole in results.jsonl
			r.Observations = []evidence.Observation{{Probe: "lp", Kind: evidence.Chat, Err: "connection refused", ErrKind: evidence.Connection,
				Logprobs: &evidence.Logprobs{Tokens: 1, Steps: []evidence.Step{{Token: "x", Logprob: -1, Top: []evidence.Alt{{Token: "x", Logprob: -1}}}}}}}
		}
		if s.answer != "" {
			r.Observations = []evidence.Observation{{Probe: "story", Kind: evidence.Chat, Prompt: "Once upon a time", Text: s.answer, FinishReason: "stop", HTTPStatus: 200}}
		}
		if err := store.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var (
	hostA = record.Host{Hostname: "gpu-a", OS: "linux", Arch: "amd64", CPUs: 64, Driver: "580.65.06", CUDA: "13.0", Versions: map[string]string{"torch": "2.12.0.dev20260310"}}
	hostB = record.Host{Hostname: "gpu-b", OS: "linux", Arch: "amd64", CPUs: 64, Driver: "580.65.06", CUDA: "13.0", Versions: map[string]string{"torch": "2.12.0.dev20260310"}}
	hostC = record.Host{Hostname: "gpu-c", OS: "linux", Arch: "amd64", CPUs: 64, Driver: "575.57.08", CUDA: "13.0", Versions: map[string]string{"torch": "2.12.0.dev20260307"}}
	t0    = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
)

func TestMergeShards(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i, h := range []record.Host{hostA, hostB, hostA} {
		dirs = append(dirs, writeShardRun(t, filepath.Join(root, "s"+string(rune('0'+i))), shardRun{shard: matrix.Shard{Index: i, Count: 3}, host: h, ended: t0}))
	}
	slices.Reverse(dirs) // the order given does not matter
	m, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Complete() || len(m.Missing) != 0 || len(m.Duplicates) != 0 {
		t.Errorf("complete %v, missing %v, duplicates %v", m.Complete(), m.Missing, m.Duplicates)
	}
	if len(m.Report.Results) != 6 || m.Report.Run.Cells != 6 {
		t.Errorf("%d results of %d cells, want 6 of 6", len(m.Report.Results), m.Report.Run.Cells)
	}
	// In the config's order, whatever shard each came from.
	var ids []string
	for _, r := range m.Report.Results {
		ids = append(ids, r.Cell.ID)
	}
	want := []string{"a=1,b=x", "a=1,b=y", "a=2,b=x", "a=2,b=y", "a=3,b=x", "a=3,b=y"}
	if d := cmp.Diff(want, ids); d != "" {
		t.Errorf("cells (-want +got):\n%s", d)
	}
	if len(m.Hosts) != 2 || m.Hosts[0].Name != "gpu-a" || len(m.Hosts[0].Runs) != 2 {
		t.Errorf("hosts %+v, want gpu-a (2 runs) and gpu-b", m.Hosts)
	}
	if len(m.Reference) != 3 {
		t.Errorf("the reference ran in %d shards, want 3", len(m.Reference))
	}
	if got := m.HostOf("a=1,b=x"); got != "gpu-a" {
		t.Errorf("the reference is shown from %s, want shard 0's host gpu-a", got)
	}
	for id, i := range m.RanOn {
		s, ok := m.Runs[0].shard.Assignment.Of[id]
		if ok && m.Runs[i].shard.Shard.Index != s {
			t.Errorf("%s: from shard %d, assigned to %d", id, m.Runs[i].shard.Shard.Index, s)
		}
	}
	for _, h := range m.Hosts {
		if len(h.Differs) > 0 {
			t.Errorf("host %s called out though all fingerprints agree: %v", h.Name, h.Differs)
		}
	}

	out := filepath.Join(root, "merged")
	if err := WriteMerged(out, m, WriteFiles); err != nil {
		t.Fatal(err)
	}
	rep, err := record.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 {
		t.Fatalf("the merged run loads %d results, want 6", len(rep.Results))
	}
	// results.jsonl keeps the logprob steps the report files leave out,
	// and the merge, whose steps are gone once written, is not written again.
	steps := 0
	for _, r := range rep.Results {
		for _, o := range r.Observations {
			if o.Logprobs != nil {
				steps += len(o.Logprobs.Steps)
			}
		}
	}
	if steps == 0 {
		t.Error("the merged results.jsonl lost the runs' logprob steps")
	}
	if err := WriteMerged(filepath.Join(root, "again"), m, WriteFiles); err == nil || !strings.Contains(err.Error(), "merge the runs again") {
		t.Errorf("a merge written twice: %v", err)
	}
	remerge := func() *Merged {
		t.Helper()
		m, err := Merge(dirs)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, r := range rep.Results {
		data, err := os.ReadFile(r.LogPath)
		if err != nil || !strings.HasPrefix(r.LogPath, out) {
			t.Errorf("%s: log %s: %v", r.Cell.ID, r.LogPath, err)
			continue
		}
		if host := m.HostOf(r.Cell.ID); !strings.Contains(string(data), host) {
			t.Errorf("%s: its log %q is not from %s", r.Cell.ID, data, host)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Hosts", "## Which host ran which cell", "| a=2,b=y | correct | gpu-", "gpu-b | shard 1/3 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Not while another bmx (here this process) holds the earlier merge:
	// it is left as it was.
	lock, err := record.LockRunDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var locked *record.LockedError
	if err := WriteMerged(out, remerge(), WriteFiles); !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Errorf("merging into a held merge: %v, want a *record.LockedError naming PID %d", err, os.Getpid())
	}
	if _, err := os.Stat(filepath.Join(out, record.MergeFile)); err != nil {
		t.Errorf("the refused merge touched the earlier one: %v", err)
	}
	lock.Unlock()
	// A second merge into the same place replaces the first.
	if err := WriteMerged(out, remerge(), WriteFiles); err != nil {
		t.Errorf("merging again into an earlier merge: %v", err)
	}
	// Anything else there is not replaced.
	if err := WriteMerged(dirs[0], remerge(), WriteFiles); err == nil || !strings.Contains(err.Error(), "not an earlier merge") {
		t.Errorf("merging into a shard's own run directory: %v", err)
	}
}

func TestMergeRefuses(t *testing.T) {
	other := strings.Replace(mergeConfig, `values = ["x", "y"]`, `values = ["x", "y", "z"]`, 1)
	tests := []struct {
		name  string
		first shardRun
		other shardRun
		want  []string
	}{
		{
			name:  "another config",
			other: shardRun{config: other},
			want:  []string{"the config differs", `line 12 is "values = [\"x\", \"y\"]" there and "values = [\"x\", \"y\", \"z\"]" here`},
		},
		{
			name:  "other vars",
			first: shardRun{vars: map[string]string{"model": "/m/a", "tp": "8"}},
			other: shardRun{vars: map[string]string{"model": "/m/b"}},
			want:  []string{`var model is "/m/b", but "/m/a"`, `var tp is unset, but "8"`},
		},
		{
			name:  "another shard count",
			other: shardRun{shard: matrix.Shard{Index: 1, Count: 2}},
			want:  []string{"the shard count is 2, but 3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			first, second := tt.first, tt.other
			first.shard, first.host, first.ended = matrix.Shard{Index: 0, Count: 3}, hostA, t0
			if second.shard.IsZero() {
				second.shard = matrix.Shard{Index: 1, Count: 3}
			}
			second.host, second.ended = hostB, t0
			a := writeShardRun(t, filepath.Join(root, "a"), first)
			b := writeShardRun(t, filepath.Join(root, "b"), second)
			_, err := Merge([]string{a, b})
			var refused *MergeRefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("Merge = %v, want a refusal", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q\nlacks %q", err, w)
				}
			}
		})
	}
	t.Run("a shard and a whole run", func(t *testing.T) {
		root := t.TempDir()
		a := writeShardRun(t, filepath.Join(root, "a"), shardRun{shard: matrix.Shard{Index: 0, Count: 2}, host: hostA, ended: t0})
		b := writeShardRun(t, filepath.Join(root, "b"), shardRun{shard: matrix.Shard{Index: 1, Count: 2}, host: hostA, ended: t0})
		if err := os.Remove(filepath.Join(b, record.ShardFile)); err != nil {
			t.Fatal(err)
		}
		_, err := Merge([]string{a, b})
		if err == nil || !strings.Contains(err.Error(), "is a whole run (no --shard), but") {
			t.Errorf("Merge = %v", err)
		}
	})
	t.Run("not a run", func(t *testing.T) {
		if _, err := Merge([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a bmx run directory") {
			t.Errorf("Merge = %v", err)
		}
	})
}

func TestMergeMissingAndDuplicates(t *testing.T) {
	root := t.TempDir()
	cfg, err := matrix.Parse("m.toml", []byte(mergeConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	a := plan.Assign(3)
	var of1, of2 []string
	for _, c := range plan.Cells {
		switch a.Of[c.ID] {
		case 1:
			of1 = append(of1, c.ID)
		case 2:
			of2 = append(of2, c.ID)
		}
	}
	if len(of1) != 2 || len(of2) != 1 {
		t.Fatalf("shards 1 and 2 have %v and %v: the test wants two cells and one", of1, of2)
	}
	// Shard 0 on gpu-a, whole. Shard 1 on gpu-b, killed after its first
	// cell, then run again on gpu-c, which has another driver and torch:
	// its second cell is only there. Shard 2 was never given.
	writeShardRun(t, filepath.Join(root, "s0"), shardRun{shard: matrix.Shard{Index: 0, Count: 3}, host: hostA, ended: t0})
	writeShardRun(t, filepath.Join(root, "s1"), shardRun{shard: matrix.Shard{Index: 1, Count: 3}, host: hostB, ended: t0,
		verdicts: map[string]classify.Verdict{plan.Reference: classify.Correct, of1[0]: classify.Crash}})
	writeShardRun(t, filepath.Join(root, "s1-again"), shardRun{shard: matrix.Shard{Index: 1, Count: 3}, host: hostC, ended: t0.Add(time.Hour),
		verdicts: map[string]classify.Verdict{plan.Reference: classify.Garbage, of1[0]: classify.Correct, of1[1]: classify.Correct}})
	m, err := Merge([]string{filepath.Join(root, "s0"), filepath.Join(root, "s1"), filepath.Join(root, "s1-again")})
	if err != nil {
		t.Fatal(err)
	}
	if m.Complete() {
		t.Error("Complete() with shard 2 missing")
	}
	var missing []string
	for _, c := range m.Missing {
		missing = append(missing, c.Cell)
		if c.Shard != 2 {
			t.Errorf("missing %s of shard %d, want 2", c.Cell, c.Shard)
		}
	}
	slices.Sort(of2)
	if d := cmp.Diff(of2, missing); d != "" {
		t.Errorf("missing (-want +got):\n%s", d)
	}
	if len(m.Duplicates) != 1 || m.Duplicates[0].Cell != of1[0] {
		t.Fatalf("duplicates %+v, want %s", m.Duplicates, of1[0])
	}
	if d := cmp.Diff([]string{"correct", "crash"}, m.Duplicates[0].Verdicts); d != "" {
		t.Errorf("duplicate's verdicts, latest first (-want +got):\n%s", d)
	}
	if got := m.HostOf(of1[0]); got != "gpu-c" {
		t.Errorf("the duplicate is shown from %s, want the latest run's host gpu-c", got)
	}
	var differs []string
	for _, h := range m.Hosts {
		if len(h.Differs) > 0 {
			differs = append(differs, h.Name)
		}
	}
	if d := cmp.Diff([]string{"gpu-c"}, differs); d != "" {
		t.Errorf("hosts called out (-want +got):\n%s", d)
	}
	notes := strings.Join(m.Notes, "\n")
	for _, want := range []string{
		"host gpu-c differs from the others (driver 580.65.06 -> 575.57.08, torch 2.12.0.dev20260310 -> 2.12.0.dev20260307): the 2 cells it ran are not comparable",
		"cell " + of1[0] + " ran 2 times: correct in ",
		"1 cell of shard 2/3 is missing (no run of that shard was given): " + of2[0],
		"the reference cell a=1,b=x was correct in",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	out := filepath.Join(root, "merged")
	if err := WriteMerged(out, m, WriteFiles); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, record.DuplicatesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dups, _, err := record.ReadResults(f)
	if err != nil || len(dups) != 1 || dups[0].Verdict != classify.Crash {
		t.Errorf("duplicates.jsonl: %v %+v", err, dups)
	}
	run, err := record.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(run.Host.Notes, "\n"), "host gpu-c differs") {
		t.Errorf("run.json's host notes do not call out gpu-c: %q", run.Host.Notes)
	}
}

// TestMergeAgreementAcrossHosts: merged cells are compared as they are now,
// and the report says when the cells that vouch for each other ran on more
// than one host.
func TestMergeAgreementAcrossHosts(t *testing.T) {
	root := t.TempDir()
	const story = "there was a little girl named Lily. She loved to play outside in the park with her friends."
	var dirs []string
	for i, h := range []record.Host{hostA, hostB} {
		dirs = append(dirs, writeShardRun(t, filepath.Join(root, "s"+string(rune('0'+i))), shardRun{shard: matrix.Shard{Index: i, Count: 2}, host: h, ended: t0, answer: story}))
	}
	m, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Report.Agreement
	if a == nil || a.Status != classify.RefConfirmed || len(a.Group) != 6 {
		t.Fatalf("agreement %+v, want all 6 cells vouching for the reference", a)
	}
	for _, r := range m.Report.Results {
		if r.ShapeOnly || len(r.VouchedBy) == 0 {
			t.Errorf("%s: shape only %v, vouched for by %v", r.Cell.ID, r.ShapeOnly, r.VouchedBy)
		}
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool {
		return strings.Contains(n, "ran on 2 hosts (gpu-a, gpu-b): their agreement was established across hosts")
	}) {
		t.Errorf("notes %q do not say the agreement spans hosts", m.Notes)
	}
	// The merged run's report files say it too, as bmx report of the
	// merged run renders them.
	out := filepath.Join(root, "merged")
	if err := WriteMerged(out, m, WriteFiles); err != nil {
		t.Fatal(err)
	}
	var written struct {
		Agreement *classify.Agreement `json:"agreement"`
	}
	data, err := os.ReadFile(filepath.Join(out, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	if written.Agreement == nil || written.Agreement.Status != a.Status || written.Agreement.Note != a.Note {
		t.Errorf("the merged report.json's agreement %+v, want %+v", written.Agreement, a)
	}
}

// TestMergeDifferingHostDoesNotVote: the cells a host with another driver
// and torch ran are not comparable with the others: they are judged
// against the yardstick, but neither vouch nor count in the agreement, in
// the merge and when the merged run is read again.
func TestMergeDifferingHostDoesNotVote(t *testing.T) {
	root := t.TempDir()
	const story = "there was a little girl named Lily. She loved to play outside in the park with her friends."
	dirs := []string{
		writeShardRun(t, filepath.Join(root, "s0"), shardRun{shard: matrix.Shard{Index: 0, Count: 2}, host: hostA, ended: t0, answer: story}),
		writeShardRun(t, filepath.Join(root, "s1"), shardRun{shard: matrix.Shard{Index: 1, Count: 2}, host: hostC, ended: t0, answer: story}),
	}
	m, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "merged")
	if err := WriteMerged(out, m, WriteFiles); err != nil {
		t.Fatal(err)
	}
	again, err := record.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, rep := range map[string]*record.Report{"merge": m.Report, "merged run read again": again} {
		onC := 0
		for _, r := range rep.Results {
			if m.HostOf(r.Cell.ID) != "gpu-c" {
				continue
			}
			onC++
			if r.Apart == "" || slices.Contains(rep.Agreement.Group, r.Cell.ID) || len(r.VouchedBy) > 0 {
				t.Errorf("%s: %s from gpu-c: apart %q, in the group %v, vouched for by %v", name, r.Cell.ID, r.Apart, rep.Agreement.Group, r.VouchedBy)
			}
		}
		if onC == 0 || len(rep.Agreement.Group) == 0 || len(rep.Agreement.Group) >= len(rep.Results) {
			t.Errorf("%s: %d cells from gpu-c, group %v of %d cells", name, onC, rep.Agreement.Group, len(rep.Results))
		}
	}
}

// TestMergeKeepsBaseline: shards swept against one baseline (each holds
// its baseline.json) make a merged run that holds it too, so reading the
// merged run judges it as the shards were judged; shards swept against
// different baselines lend none, and the merge says so.
func TestMergeKeepsBaseline(t *testing.T) {
	root := t.TempDir()
	y := &record.Yardstick{Run: "20260309T000000Z-m", Cell: "a=1,b=x", Status: classify.RefConfirmed, Group: 3, ProbeSet: "smoke",
		Observations: []evidence.Observation{{Probe: "story", Kind: evidence.Chat, Prompt: "Once upon a time", Text: "there was a cat.", FinishReason: "stop", HTTPStatus: 200}}}
	var dirs []string
	for i := range 2 {
		dir := writeShardRun(t, filepath.Join(root, "s"+string(rune('0'+i))), shardRun{shard: matrix.Shard{Index: i, Count: 2}, host: hostA, ended: t0})
		if err := record.WriteYardstick(dir, y); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	m, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "merged")
	if err := WriteMerged(out, m, nil); err != nil {
		t.Fatal(err)
	}
	got, err := record.ReadYardstick(out)
	if err != nil || got == nil || got.Name() != y.Name() {
		t.Fatalf("the merged run's baseline: %+v, %v; want %s", got, err, y.Name())
	}

	other := *y
	other.Run = "20260308T000000Z-m"
	if err := record.WriteYardstick(dirs[1], &other); err != nil {
		t.Fatal(err)
	}
	if m, err = Merge(dirs); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(root, "merged2")
	if err := WriteMerged(out2, m, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := record.ReadYardstick(out2); err != nil || got != nil {
		t.Errorf("shards of two baselines: the merged run holds %+v (%v), want none", got, err)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "swept against different baselines") }) {
		t.Errorf("no note of the two baselines: %q", m.Notes)
	}

	// One shard with the baseline, one without: none is lent either.
	if err := os.Remove(filepath.Join(dirs[1], record.BaselineFile)); err != nil {
		t.Fatal(err)
	}
	if m, err = Merge(dirs); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.Contains(n, "1 of the runs were swept against the baseline") }) {
		t.Errorf("no note of the shards without a baseline: %q", m.Notes)
	}
}
