package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/record"
)

// MergeRefusedError says why runs cannot be merged: they are runs of
// different sweeps. Each problem is a line.
type MergeRefusedError struct{ Problems []string }

func (e *MergeRefusedError) Error() string {
	return "cannot merge: the runs are not parts of one sweep:\n" + strings.Join(e.Problems, "\n")
}

// MergedRun is one input of a merge.
type MergedRun struct {
	Dir string `json:"dir"`
	// Shard is "i/n", or "" for a run that was not a shard.
	Shard string `json:"shard,omitempty"`
	// Host is an index into Merged.Hosts.
	Host        int       `json:"host"`
	Cells       int       `json:"cells"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Started     time.Time `json:"started"`
	Ended       time.Time `json:"ended,omitzero"`

	run     *record.Run
	shard   *record.ShardRecord
	results []record.Result
	// baseline is the yardstick the run was swept against (--baseline;
	// nil: none).
	baseline *record.Yardstick
}

// MergedHost is a host that ran part of a merged sweep: its fingerprint
// and what it ran.
type MergedHost struct {
	Name string      `json:"name"`
	Host record.Host `json:"host"`
	// BMXVersion is the bmx that ran there.
	BMXVersion string `json:"bmx_version"`
	Runs       []int  `json:"runs"`
	Cells      int    `json:"cells"`
	// Differs lists how this host's fingerprint differs from the one most
	// runs share ("driver 575.57.08 -> 580.65.06"); its cells are not
	// comparable with the others'.
	Differs []string `json:"differs,omitempty"`
}

// Duplicate is a cell that ran in more than one run (the reference cell of
// a sharded sweep, which runs in every shard, is not one).
type Duplicate struct {
	Cell string `json:"cell"`
	// Runs are the runs it ran in, the one the report shows first.
	Runs     []int    `json:"runs"`
	Verdicts []string `json:"verdicts"`
}

// MissingCell is a cell of the plan that no run finished.
type MissingCell struct {
	Cell string `json:"cell"`
	// Shard is the shard that should have run it (-1 when the runs were
	// not shards).
	Shard int `json:"shard"`
}

// ReferenceRun is the reference cell as one shard ran it.
type ReferenceRun struct {
	Run     int    `json:"run"`
	Verdict string `json:"verdict"`
}

// runResult is a result and the run (index into Merged.Runs) it is from.
type runResult struct {
	run int
	r   record.Result
}

// Merged is the runs of one sweep, made one run: one result a cell, and
// where each came from.
type Merged struct {
	Report     *record.Report `json:"-"`
	Runs       []MergedRun    `json:"runs"`
	Hosts      []MergedHost   `json:"hosts"`
	RanOn      map[string]int `json:"ran_on"` // cell ID -> index into Runs
	Duplicates []Duplicate    `json:"duplicates"`
	Missing    []MissingCell  `json:"missing"`
	// Reference is the reference cell as each shard that ran it got it:
	// the cells of a shard were judged against that shard's run of it.
	Reference []ReferenceRun `json:"reference,omitempty"`
	// Notes are what a reader must know: hosts whose fingerprint differs,
	// duplicates, missing cells, a reference that disagrees.
	Notes []string `json:"notes"`

	dups []runResult // the results of duplicates the report does not show
	// written: WriteMerged wrote it, and its results lost their logprob
	// steps on the way (a second write would lose them from results.jsonl).
	written bool
	// baseline is the yardstick the parts were swept against, which judges
	// the merged run where its own cells choose none (nil: none).
	baseline *record.Yardstick
}

// Merge reads the run directories of one sweep (its shards, or runs with
// --only on several hosts) and makes them one run. It refuses runs of
// different sweeps (another config, other vars or probe set, another shard
// count) with a *MergeRefusedError that says what differs. A cell run twice
// keeps both results: the report shows the one that ended last, the other
// goes to duplicates.jsonl, and Duplicates says so.
func Merge(dirs []string) (*Merged, error) {
	if len(dirs) == 0 {
		return nil, errors.New("no runs to merge")
	}
	m := &Merged{RanOn: map[string]int{}, Duplicates: []Duplicate{}, Missing: []MissingCell{}, Notes: []string{}}
	for _, dir := range dirs {
		mr, err := readMergeInput(dir)
		if err != nil {
			return nil, err
		}
		m.Runs = append(m.Runs, *mr)
	}
	// Shards in order, then the other runs as given.
	slices.SortStableFunc(m.Runs, func(a, b MergedRun) int { return shardIndex(a) - shardIndex(b) })
	if err := m.check(); err != nil {
		return nil, err
	}
	m.hosts()
	m.pick()
	m.missing()
	results, apart := m.results(), m.apart()
	for i := range results {
		results[i].Apart = apart[results[i].Cell.ID]
	}
	m.Report = record.NewReport(m.run(), results)
	m.useBaseline()
	m.agreementAcrossHosts()
	m.Report.Run.Notes = append(m.Report.Run.Notes, m.Notes...)
	return m, nil
}

// useBaseline judges the merged run against the yardstick its parts were
// swept against (sweep --baseline, each shard's baseline.json), as the
// parts were, where its own cells choose none; parts swept against
// different yardsticks, or some against one and some without, lend none,
// and a note says so.
func (m *Merged) useBaseline() {
	var y *record.Yardstick
	without := 0
	for _, r := range m.Runs {
		switch b := r.baseline; {
		case b == nil:
			without++
		case y == nil:
			y = b
		case b.Name() != y.Name():
			m.note("the runs were swept against different baselines (%s, %s): the merged run is judged against neither", y.Name(), b.Name())
			return
		}
	}
	if y != nil && without > 0 {
		m.note("%d of the runs were swept against the baseline %s and %d without one: the merged run is judged against none", len(m.Runs)-without, y.Name(), without)
		return
	}
	if y == nil {
		return
	}
	m.baseline = y
	if _, why := m.Report.UseBaseline(y); why != "" {
		m.note("the baseline the runs were swept against (%s) does not judge the merged run: %s", y.Name(), why)
	}
}

// apart are the cells that ran on a host whose fingerprint differs from
// the one most runs share: not comparable with the others, they do not
// vote in the agreement among cells.
func (m *Merged) apart() map[string]string {
	out := map[string]string{}
	for id, i := range m.RanOn {
		if h := m.Hosts[m.Runs[i].Host]; len(h.Differs) > 0 {
			out[id] = fmt.Sprintf("ran on host %s (%s)", h.Name, strings.Join(h.Differs, ", "))
		}
	}
	return out
}

// agreementAcrossHosts notes when the cells that vouch for each other (the
// agreement NewReport found among the merged cells, compared as they are
// now) ran on more than one host.
func (m *Merged) agreementAcrossHosts() {
	a := m.Report.Agreement
	if a == nil || len(a.Group) < 2 {
		return
	}
	hosts := map[string]bool{}
	for _, id := range a.Group {
		if i, ok := m.RanOn[id]; ok {
			hosts[m.Runs[i].run.Host.Hostname] = true
		}
	}
	if len(hosts) > 1 {
		m.note("the %d cells that agree with each other ran on %d hosts (%s): their agreement was established across hosts",
			len(a.Group), len(hosts), strings.Join(slices.Sorted(maps.Keys(hosts)), ", "))
	}
}

func readMergeInput(dir string) (*MergedRun, error) {
	// The parts are read as judged; the agreement among cells is applied
	// once, to the merged run (record.NewReport in Merge).
	rep, err := record.LoadRecorded(dir)
	if err != nil {
		return nil, err
	}
	shard, err := record.ReadShard(dir)
	if err != nil {
		return nil, err
	}
	baseline, err := record.ReadYardstick(dir)
	if err != nil {
		return nil, err
	}
	mr := &MergedRun{Dir: dir, Cells: rep.Run.Cells, Interrupted: rep.Run.Interrupted,
		Started: rep.Run.Started, Ended: rep.Run.Ended, run: rep.Run, shard: shard, results: rep.Results, baseline: baseline}
	if shard != nil {
		mr.Shard = shard.Shard.String()
	}
	return mr, nil
}

// shardIndex orders shards first, by index.
func shardIndex(r MergedRun) int {
	if r.shard == nil {
		return 1 << 30
	}
	return r.shard.Shard.Index
}

// check refuses runs that are not parts of one sweep, naming every
// difference against the first run.
func (m *Merged) check() error {
	first := m.Runs[0]
	var problems []string
	differ := func(r MergedRun, what, a, b string) {
		problems = append(problems, fmt.Sprintf("%s: %s is %s, but %s in %s", r.Dir, what, b, a, first.Dir))
	}
	for _, r := range m.Runs[1:] {
		a, b := first.run, r.run
		if a.Name != b.Name {
			differ(r, "the matrix name", a.Name, b.Name)
		}
		if a.Config != b.Config {
			problems = append(problems, fmt.Sprintf("%s: the config differs from %s's: %s", r.Dir, first.Dir, firstLineDiff(a.Config, b.Config)))
		}
		for _, k := range slices.Sorted(maps.Keys(union(a.Vars, b.Vars))) {
			if a.Vars[k] != b.Vars[k] {
				differ(r, "var "+k, quoteOrUnset(a.Vars, k), quoteOrUnset(b.Vars, k))
			}
		}
		if a.ProbeSet != b.ProbeSet {
			differ(r, "the probe set", a.ProbeSet, b.ProbeSet)
		}
		if (first.shard == nil) != (r.shard == nil) {
			problems = append(problems, fmt.Sprintf("%s is %s, but %s is %s: merge the shards of one split, or whole runs", r.Dir, shardWords(r), first.Dir, shardWords(first)))
			continue
		}
		if first.shard == nil {
			continue // runs of one config, each with its own --only
		}
		if x, y := first.shard.Shard.Count, r.shard.Shard.Count; x != y {
			differ(r, "the shard count", fmt.Sprint(x), fmt.Sprint(y))
		}
		if x, y := strings.Join(a.Only, " "), strings.Join(b.Only, " "); x != y {
			differ(r, "the --only filter", orNone(x), orNone(y))
		}
	}
	if len(problems) > 0 {
		return &MergeRefusedError{Problems: problems}
	}
	return nil
}

func shardWords(r MergedRun) string {
	if r.shard == nil {
		return "a whole run (no --shard)"
	}
	return "shard " + r.shard.Shard.String()
}

func union(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

func quoteOrUnset(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%q", v)
	}
	return "unset"
}

// firstLineDiff names the first line where two config texts differ.
func firstLineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d is %q there and %q here", i+1, clip(strings.TrimSpace(x), 80), clip(strings.TrimSpace(y), 80))
		}
	}
	return "they differ in line endings"
}

// hosts groups the runs by host and fingerprint and calls out every host
// whose fingerprint is not the one most runs share.
func (m *Merged) hosts() {
	for i, r := range m.Runs {
		h := -1
		for j, mh := range m.Hosts {
			if mh.Host.Hostname == r.run.Host.Hostname && len(hostChanges(m.Runs[mh.Runs[0]].run, r.run)) == 0 {
				h = j
				break
			}
		}
		if h < 0 {
			h = len(m.Hosts)
			m.Hosts = append(m.Hosts, MergedHost{Name: r.run.Host.Hostname, Host: r.run.Host, BMXVersion: r.run.BMXVersion})
		}
		m.Hosts[h].Runs = append(m.Hosts[h].Runs, i)
		m.Runs[i].Host = h
	}
	// Hosts of one name with two fingerprints (upgraded between shards)
	// are told apart.
	for i := range m.Hosts {
		n := 1
		for j := range i {
			if m.Hosts[j].Host.Hostname == m.Hosts[i].Host.Hostname {
				n++
			}
		}
		if n > 1 {
			m.Hosts[i].Name = fmt.Sprintf("%s#%d", m.Hosts[i].Name, n)
		}
	}
	// The common fingerprint: the one most runs have (the first on a tie).
	common, most := 0, 0
	for i, h := range m.Hosts {
		n := 0
		for _, o := range m.Hosts {
			if len(hostChanges(m.Runs[h.Runs[0]].run, m.Runs[o.Runs[0]].run)) == 0 {
				n += len(o.Runs)
			}
		}
		if n > most {
			common, most = i, n
		}
	}
	base := m.Runs[m.Hosts[common].Runs[0]].run
	for i, h := range m.Hosts {
		for _, c := range hostChanges(base, m.Runs[h.Runs[0]].run) {
			m.Hosts[i].Differs = append(m.Hosts[i].Differs, fmt.Sprintf("%s %s -> %s", c.Field, c.Base, c.New))
		}
	}
}

// pick chooses each cell's result: the reference from the first shard that
// ran it, any other cell from the run where it ended last.
func (m *Merged) pick() {
	all := map[string][]runResult{}
	var order []string
	ref := m.Runs[0].run.Reference
	for i, r := range m.Runs {
		for _, res := range r.results {
			if _, ok := all[res.Cell.ID]; !ok {
				order = append(order, res.Cell.ID)
			}
			all[res.Cell.ID] = append(all[res.Cell.ID], runResult{i, res})
		}
	}
	for _, id := range order {
		got := all[id]
		if id == ref && m.Runs[0].shard != nil {
			m.pickReference(got)
		} else {
			slices.SortStableFunc(got, func(a, b runResult) int { return b.r.Ended.Compare(a.r.Ended) })
			m.duplicates(got)
		}
		m.RanOn[id] = got[0].run
		m.Hosts[m.Runs[got[0].run].Host].Cells++
	}
	for _, h := range m.Hosts {
		if len(h.Differs) > 0 {
			var cells []string
			for _, id := range order {
				if m.Hosts[m.Runs[m.RanOn[id]].Host].Name == h.Name {
					cells = append(cells, id)
				}
			}
			m.note("host %s differs from the others (%s): the %s it ran are not comparable with theirs: %s",
				h.Name, strings.Join(h.Differs, ", "), plural(len(cells), "cell"), strings.Join(cells, "; "))
		}
	}
}

// pickReference records the reference cell as each shard ran it; the
// first shard's is the one shown. Each shard judged its cells against its
// own, so one that disagrees is called out.
func (m *Merged) pickReference(got []runResult) {
	first := got[0]
	for _, g := range got {
		m.Reference = append(m.Reference, ReferenceRun{Run: g.run, Verdict: g.r.Shown()})
		if g.r.Verdict != first.r.Verdict {
			m.note("the reference cell %s was %s in %s but %s in %s: the cells of %s were judged against another reference answer",
				g.r.Cell.ID, first.r.Shown(), m.Runs[first.run].Dir, g.r.Shown(), m.Runs[g.run].Dir, m.Runs[g.run].Dir)
		}
	}
}

// duplicates records a cell that ran more than once (got, latest first):
// the latest is shown, the others are kept for duplicates.jsonl.
func (m *Merged) duplicates(got []runResult) {
	if len(got) < 2 {
		return
	}
	d := Duplicate{Cell: got[0].r.Cell.ID}
	var where []string
	for _, g := range got {
		d.Runs = append(d.Runs, g.run)
		d.Verdicts = append(d.Verdicts, g.r.Shown())
		where = append(where, fmt.Sprintf("%s in %s on %s", g.r.Shown(), m.Runs[g.run].Dir, m.Hosts[m.Runs[g.run].Host].Name))
	}
	m.dups = append(m.dups, got[1:]...)
	m.Duplicates = append(m.Duplicates, d)
	m.note("cell %s ran %d times: %s; the report shows the latest, the others are in %s", d.Cell, len(got), strings.Join(where, ", "), record.DuplicatesFile)
}

// missing lists the cells of the plan that no run finished.
func (m *Merged) missing() {
	for _, r := range m.Runs {
		if r.shard == nil {
			continue
		}
		a := r.shard.Assignment
		var ids []string
		if a.Reference != "" {
			ids = append(ids, a.Reference)
		}
		ids = append(ids, slices.Sorted(maps.Keys(a.Of))...)
		for _, id := range ids {
			if _, ok := m.RanOn[id]; ok {
				continue
			}
			s, ok := a.Of[id]
			if !ok {
				s = 0
			}
			m.Missing = append(m.Missing, MissingCell{Cell: id, Shard: s})
		}
		break
	}
	if m.Runs[0].shard == nil {
		// Whole runs: each knows only how many cells it planned.
		for _, r := range m.Runs {
			if n := r.Cells - len(r.results); n > 0 {
				m.note("%s planned %d cells and finished %d", r.Dir, r.Cells, len(r.results))
			}
		}
		return
	}
	have := map[int]bool{}
	for _, r := range m.Runs {
		have[r.shard.Shard.Index] = true
	}
	byShard := map[int][]string{}
	for _, c := range m.Missing {
		byShard[c.Shard] = append(byShard[c.Shard], c.Cell)
	}
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		why := "its run did not finish them"
		if !have[s] {
			why = "no run of that shard was given"
		}
		are := "are"
		if len(byShard[s]) == 1 {
			are = "is"
		}
		m.note("%s of shard %d/%d %s missing (%s): %s", plural(len(byShard[s]), "cell"), s, m.Runs[0].shard.Shard.Count, are, why, strings.Join(byShard[s], "; "))
	}
}

func (m *Merged) note(format string, args ...any) {
	m.Notes = append(m.Notes, fmt.Sprintf(format, args...))
}

// Complete reports whether every cell of the plan has a result.
func (m *Merged) Complete() bool {
	return len(m.Missing) == 0 && len(m.Report.Results) >= m.Report.Run.Cells
}

// run is the merged run.json: the first run's sweep, the common host's
// fingerprint with every other host named in its notes, the span of all.
func (m *Merged) run() *record.Run {
	first := m.Runs[0].run
	run := *first
	run.Host = m.Runs[m.Hosts[0].Runs[0]].run.Host
	for _, h := range m.Hosts {
		if len(h.Differs) == 0 {
			run.Host = h.Host
			break
		}
	}
	run.Host.Notes = slices.Clone(run.Host.Notes)
	run.Host.Hostname = m.hostNames()
	run.Host.Notes = append(run.Host.Notes, fmt.Sprintf("merged from %d runs on %d hosts; %s says which host ran which cell", len(m.Runs), len(m.Hosts), record.MergeFile))
	for _, h := range m.Hosts {
		if len(h.Differs) > 0 {
			run.Host.Notes = append(run.Host.Notes, fmt.Sprintf("host %s differs: %s: its cells are not comparable", h.Name, strings.Join(h.Differs, ", ")))
		}
	}
	run.Notes, run.Slots, run.Interrupted, run.Resumed = nil, nil, false, 0
	if s := m.Runs[0].shard; s != nil {
		run.Cells = len(s.Assignment.Of)
		if s.Assignment.Reference != "" {
			run.Cells++
		}
	} else {
		// Whole runs, each with its own --only: the cells they finished,
		// and those they planned and did not.
		run.Cells = len(m.RanOn)
		for _, r := range m.Runs {
			run.Cells += max(0, r.Cells-len(r.results))
			if !slices.Equal(r.run.Only, first.Only) {
				run.Only = nil
			}
		}
	}
	for _, r := range m.Runs {
		if r.Started.Before(run.Started) {
			run.Started = r.Started
		}
		if r.Ended.After(run.Ended) {
			run.Ended = r.Ended
		}
		run.Interrupted = run.Interrupted || r.Interrupted
		run.Resumed += r.run.Resumed
		for _, s := range r.run.Slots {
			if !slices.Contains(run.Slots, s) {
				run.Slots = append(run.Slots, s)
			}
		}
		for _, n := range r.run.Notes {
			run.Notes = append(run.Notes, filepath.Base(r.Dir)+": "+n)
		}
	}
	return &run
}

func (m *Merged) hostNames() string {
	var names []string
	for _, h := range m.Hosts {
		names = append(names, h.Name)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names, ", ")
}

// results are the chosen result of every cell.
func (m *Merged) results() []record.Result {
	var out []record.Result
	done := map[string]bool{}
	for i, r := range m.Runs {
		for _, res := range r.results {
			if m.RanOn[res.Cell.ID] == i && !done[res.Cell.ID] {
				done[res.Cell.ID] = true
				out = append(out, res)
			}
		}
	}
	return out
}

// ReadMerged reads a merged run directory back: its report and merge.json.
func ReadMerged(dir string) (*Merged, error) {
	rep, err := record.Load(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, record.MergeFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a merged run: %w", dir, err)
	}
	var m Merged
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, record.MergeFile), err)
	}
	m.Report = rep
	return &m, nil
}

// WriteMerged writes the merged run into out (record.WriteMergedDir):
// results.jsonl (one result a cell, so every command that reads runs reads
// it), duplicates.jsonl, run.json, merge.json, every run's logs and,
// through writeReports, the report files; report.md then gets a section on
// the hosts and which of them ran which cell. out must not exist or must
// hold an earlier merge, which is replaced once the new one is complete.
//
// m is written once: on the way its results lose their logprob steps, which
// only results.jsonl keeps (record.DropSteps), and a second write of it is
// refused; Merge again to write again.
func WriteMerged(out string, m *Merged, writeReports func(dir string, rep *record.Report) error) error {
	return WriteMergedContext(context.Background(), out, m, writeReports)
}

// WriteMergedContext is WriteMerged that stops when ctx ends (the user's
// Ctrl-C), with record.ErrMergeInterrupted, removing what it staged.
func WriteMergedContext(ctx context.Context, out string, m *Merged, writeReports func(dir string, rep *record.Report) error) error {
	if m.written {
		return errors.New("this merge was written already (its logprob steps are gone from memory): merge the runs again")
	}
	d := &record.MergedDir{Report: m.Report, RanOn: m.RanOn, Baseline: m.baseline, Merge: m}
	for _, r := range m.Runs {
		d.Parts = append(d.Parts, r.Dir)
	}
	for _, dup := range m.dups {
		d.Duplicates = append(d.Duplicates, record.PartResult{Part: dup.run, Result: dup.r})
	}
	if writeReports != nil {
		d.Reports = func(dir string, rep *record.Report) error {
			if err := writeReports(dir, rep); err != nil {
				return err
			}
			return m.appendMarkdown(filepath.Join(dir, MarkdownFile))
		}
	}
	err := record.WriteMergedDir(ctx, out, d)
	m.written = m.written || d.StepsDropped
	return err
}

// appendMarkdown adds the hosts and which host ran which cell to report.md.
func (m *Merged) appendMarkdown(path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := MergeMarkdown(f, m); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// HostOf names the host that ran the result the report shows for a cell
// ("" for a cell no run finished).
func (m *Merged) HostOf(cell string) string {
	i, ok := m.RanOn[cell]
	if !ok {
		return ""
	}
	return m.Hosts[m.Runs[i].Host].Name
}
