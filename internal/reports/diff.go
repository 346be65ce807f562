package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Kinds of flip between two runs.
const (
	Regression = "regression" // correct before, failing now
	Fix        = "fix"        // failing before, correct now
	Changed    = "changed"    // a different verdict, neither of the above
	Added      = "new"        // a cell only the new run has
	// YardstickLost is a cell that failed in the base only against its
	// yardstick (degraded or wrong there, correct on its evidence alone)
	// and is correct in the new run on its own, which has no yardstick to
	// judge it by: nothing shows it fixed. Where the base's yardstick can
	// judge the new run, the flip says what the cell is against it.
	YardstickLost = "yardstick-lost"
	Removed       = "removed" // a cell only the base run has
	// PerfRegression is a cell served slower than before, beyond noise
	// (see PerfChange); PerfImprovement faster.
	PerfRegression  = "perf-regression"
	PerfImprovement = "perf-improvement"
)

// FlipKinds are the kinds --fail-on may name: verdict flips, and the
// performance changes, which Count counts alike.
var FlipKinds = []string{Regression, Fix, YardstickLost, Changed, Added, Removed, PerfRegression, PerfImprovement}

// Flip is one cell whose verdict differs between two runs.
type Flip struct {
	Cell      string           `json:"cell"`
	Kind      string           `json:"kind"`
	Base      classify.Verdict `json:"base,omitempty"`
	New       classify.Verdict `json:"new,omitempty"`
	Signature string           `json:"signature,omitempty"` // the new run's
	// XPass marks a fix of a cell a [[known]] entry of the new run
	// covers: the known issue passes now, its workaround can go.
	XPass bool `json:"xpass,omitempty"`
	// Alone is the new run's verdict on its own, where New is its verdict
	// against the base's yardstick and differs (a yardstick-lost flip).
	Alone classify.Verdict `json:"alone,omitempty"`
	// Note says what a yardstick-lost flip rests on.
	Note string `json:"note,omitempty"`
}

// label is the flip's kind as a table shows it, "fix (xpass)" for an XPASS.
func (f Flip) label() string {
	switch {
	case f.XPass:
		return f.Kind + " (xpass)"
	case f.Kind == YardstickLost:
		return "yardstick lost"
	}
	return f.Kind
}

// newText is the flip's new verdict as a table shows it: "degraded
// (correct alone)" where the base's yardstick judged it.
func (f Flip) newText() string {
	if f.Alone != "" {
		return fmt.Sprintf("%s (%s alone)", f.New, f.Alone)
	}
	return orNone(string(f.New))
}

// HostChange is one difference between the runs' host fingerprints.
type HostChange struct {
	Field string `json:"field"`
	Base  string `json:"base"`
	New   string `json:"new"`
}

// Diff compares two runs of a matrix: a nightly upgrade, say.
type Diff struct {
	Base string `json:"base"`
	New  string `json:"new"`
	// Config are the differences between the runs' configs, as run.json
	// recorded them (secrets redacted in both, so a changed secret does not
	// show); ConfigNotes say what could not be compared.
	Config      []ConfigChange `json:"config"`
	ConfigNotes []string       `json:"config_notes,omitempty"`
	Flips       []Flip         `json:"flips"`
	Host        []HostChange   `json:"host"`
	// Perf are the cells whose serving speed changed beyond noise.
	Perf      []PerfChange `json:"perf"`
	Unchanged int          `json:"unchanged"`
	// XPass are the new run's cells a [[known]] entry covers that pass,
	// flipped or not: the issues to remove from the config.
	XPass []string `json:"xpass"`
	// Predicted counts cells --prune did not start in one run or the other:
	// not compared, so never a regression nor a fix.
	Predicted int `json:"predicted,omitempty"`
	// Yardstick says, when the new run's own cells chose no yardstick,
	// what its cells are judged against: the base's verified yardstick,
	// or nothing (and why).
	Yardstick string `json:"yardstick,omitempty"`
}

// Compare lists the flips from base to new, in the new run's order (removed
// cells last), and the host fingerprint changes.
//
// A new run whose own cells chose no yardstick is judged against the
// base's verified yardstick where it can be (the same model and probe set;
// record.Report.UseBaseline), and a cell that failed in the base only
// against its yardstick and is correct in the new run on its own is a
// yardstick-lost flip, never a fix, unless the base's yardstick finds it
// correct too.
func Compare(base, new *record.Report) *Diff {
	d := &Diff{Base: base.Run.Name, New: new.Run.Name, Flips: []Flip{}, Host: []HostChange{}, Perf: []PerfChange{}, XPass: []string{}}
	d.Config, d.ConfigNotes = configChanges(base.Run, new.Run)
	new, d.Yardstick = AgainstBase(base, new)
	before := map[string]record.Result{}
	for _, r := range base.Results {
		before[r.Cell.ID] = r
	}
	seen := map[string]bool{}
	for _, r := range new.Results {
		seen[r.Cell.ID] = true
		st, _ := Status(new, r)
		if st == XPass {
			d.XPass = append(d.XPass, r.Cell.ID)
		}
		b, ok := before[r.Cell.ID]
		switch {
		case r.Verdict == classify.Predicted || ok && b.Verdict == classify.Predicted:
			d.Predicted++
		case !ok:
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: Added, New: r.Verdict, Signature: r.Signature})
		case LostYardstick(new, b, r):
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: YardstickLost, Base: b.Verdict, New: r.Verdict, Signature: r.Signature,
				Alone: r.Alone, Note: lostNote(base, new, b, r)})
		case b.Verdict == r.Verdict:
			d.Unchanged++
		default:
			kind := Changed
			switch {
			case b.Verdict == classify.Correct && failed(r.Verdict):
				kind = Regression
			case failed(b.Verdict) && r.Verdict == classify.Correct:
				kind = Fix
			}
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: kind, Base: b.Verdict, New: r.Verdict, Signature: r.Signature, XPass: kind == Fix && st == XPass})
		}
	}
	for _, r := range base.Results {
		if !seen[r.Cell.ID] && r.Verdict != classify.Predicted {
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: Removed, Base: r.Verdict})
		}
	}
	d.Host = hostChanges(base.Run, new.Run)
	d.Perf = perfChanges(base, new)
	return d
}

// AgainstBase is the new run as a comparison with base judges it: where
// its own cells chose no yardstick, a copy judged against the base's
// verified yardstick (record.Report.UseBaseline); and a sentence saying
// so, or why nothing judges its cells ("" when they chose a yardstick of
// their own, or the run was already judged against a baseline's).
func AgainstBase(base, new *record.Report) (*record.Report, string) {
	lost := new.OwnYardstickLost()
	switch {
	case lost == "":
		return new, ""
	case new.Agreement != nil && new.Agreement.Baseline != "":
		return new, fmt.Sprintf("%s chose no yardstick of its own (%s): it was judged against %s", new.Label(), lost, new.Agreement.Baseline)
	case new.Agreement == nil:
		return new, ""
	}
	y := base.Yardstick()
	if y == nil {
		return new, fmt.Sprintf("%s has no yardstick (%s), and %s has no verified one to lend: greedy answers are judged by their shape only", new.Label(), lost, base.Label())
	}
	judged := new.Clone()
	used, why := judged.UseBaseline(y)
	if !used {
		return new, fmt.Sprintf("%s has no yardstick (%s), and the yardstick of %s cannot judge it (%s): greedy answers are judged by their shape only", new.Label(), lost, base.Label(), why)
	}
	return judged, fmt.Sprintf("%s chose no yardstick of its own (%s): its cells are judged against %s", new.Label(), lost, judged.Agreement.Baseline)
}

// LostYardstick reports a cell of new (as a comparison judges it) that
// failed in the base only against its yardstick (b) and is correct in new
// on its own (r), which has no yardstick of its own: its verdict in new is
// then no fix (YardstickLost). Judged against the base's yardstick and
// correct, it is one. Diff, history and publish apply this one rule.
func LostYardstick(new *record.Report, b, r record.Result) bool {
	if b.Verdict != classify.Degraded && b.Verdict != classify.Wrong {
		return false
	}
	own := r.Verdict
	if r.Alone != "" {
		own = r.Alone
	}
	if own != classify.Correct || new.OwnYardstickLost() == "" {
		return false
	}
	if new.Agreement != nil && new.Agreement.Baseline != "" && r.Verdict == classify.Correct {
		return false // correct against the base's yardstick too: a fix
	}
	return b.AloneCorrect()
}

// lostNote says what a yardstick-lost flip rests on.
func lostNote(base, new *record.Report, b, r record.Result) string {
	s := fmt.Sprintf("%s in %s against its yardstick; %s has none of its own (%s)", b.Verdict, base.Label(), new.Label(), new.OwnYardstickLost())
	if new.Agreement != nil && new.Agreement.Baseline != "" {
		return s + fmt.Sprintf(": correct on its own, %s against %s", r.Verdict, new.Agreement.Baseline)
	}
	return s + ": correct by its answers' shape and expectations only, nothing shows it fixed"
}

func hostChanges(a, b *record.Run) []HostChange {
	out := []HostChange{}
	add := func(field, x, y string) {
		if x != y {
			out = append(out, HostChange{Field: field, Base: orNone(x), New: orNone(y)})
		}
	}
	add("gpu", a.Host.GPU, b.Host.GPU)
	add("gpus", fmt.Sprint(len(a.Host.GPUs)), fmt.Sprint(len(b.Host.GPUs)))
	add("driver", a.Host.Driver, b.Host.Driver)
	add("cuda", a.Host.CUDA, b.Host.CUDA)
	keys := slices.Sorted(maps.Keys(a.Host.Versions))
	for k := range b.Host.Versions {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(k, a.Host.Versions[k], b.Host.Versions[k])
	}
	add("bmx", a.BMXVersion, b.BMXVersion)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Count counts the cells with a flip or performance change of the given
// kinds, as a gate counts them: a cell slower in tokens/s and in TTFT, or
// at two concurrencies, is one perf-regression. Count(PerfRegression) > 0
// is what --fail-on perf-regression fails on.
func (d *Diff) Count(kinds ...string) int {
	cells := map[string]bool{}
	for _, f := range d.Flips {
		if slices.Contains(kinds, f.Kind) {
			cells[f.Cell] = true
		}
	}
	for _, p := range d.Perf {
		if slices.Contains(kinds, p.Kind) {
			cells[p.Cell] = true
		}
	}
	return len(cells)
}

// Lines are one line per flip and performance change of these kinds,
// naming the cell and what changed: what a --fail-on gate prints.
func (d *Diff) Lines(kinds ...string) []string {
	var out []string
	for _, f := range d.Flips {
		if slices.Contains(kinds, f.Kind) {
			out = append(out, f.Cell+": "+f.text())
		}
	}
	for _, p := range d.Perf {
		if slices.Contains(kinds, p.Kind) {
			out = append(out, p.Cell+": "+p.text())
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (d *Diff) summary() string {
	var parts []string
	for _, k := range FlipKinds {
		if n := d.Count(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no flips")
	}
	if n := len(d.XPass); n > 0 {
		parts = append(parts, fmt.Sprintf("%d xpass (known issues that pass now)", n))
	}
	s := fmt.Sprintf("%s -> %s: %s; %d cells unchanged", d.Base, d.New, strings.Join(parts, ", "), d.Unchanged)
	if d.Predicted > 0 {
		s += fmt.Sprintf("; %d predicted (not started, not compared)", d.Predicted)
	}
	return s
}

// configLines are the config section of a diff: one line per change, or
// "config: unchanged", then the notes.
func (d *Diff) configLines() []string {
	var out []string
	for _, c := range d.Config {
		out = append(out, c.String())
	}
	if len(out) == 0 {
		out = append(out, "config: unchanged")
	}
	for _, n := range d.ConfigNotes {
		out = append(out, "config: note: "+n)
	}
	if d.Yardstick != "" {
		out = append(out, "yardstick: "+d.Yardstick)
	}
	return out
}

// DiffTable renders a diff for the terminal.
func DiffTable(w io.Writer, d *Diff) error {
	fmt.Fprintln(w, record.Clean(d.summary()))
	for _, l := range d.configLines() {
		fmt.Fprintln(w, record.Clean(l))
	}
	if len(d.Flips) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, []string{"cell", "flip", "base", "new", "signature"})
		for _, f := range d.Flips {
			if err := t.Append([]string{record.Clean(f.Cell), f.label(), orNone(string(f.Base)), f.newText(), clip(record.Clean(f.Signature), 60)}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		for _, f := range d.Flips {
			if f.Note != "" {
				fmt.Fprintf(w, "%s: %s\n", record.Clean(f.Cell), record.Clean(f.Note))
			}
		}
	}
	if len(d.Perf) > 0 {
		fmt.Fprintln(w, "\nperformance (beyond 10% and outside both runs' spread):")
		t := newTable(w, perfChangeHeader)
		for _, p := range d.Perf {
			if err := t.Append(p.row(record.Clean)); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if len(d.Host) > 0 {
		fmt.Fprintln(w, "\nhost:")
		t := newTable(w, []string{"what", "base", "new"})
		for _, h := range d.Host {
			if err := t.Append([]string{record.Clean(h.Field), record.Clean(h.Base), record.Clean(h.New)}); err != nil {
				return err
			}
		}
		return t.Render()
	}
	return nil
}

// DiffMarkdown renders a diff as GitHub-flavoured Markdown.
func DiffMarkdown(w io.Writer, d *Diff) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# bmx diff\n\n%s\n\n", mdCell(d.summary()))
	for _, l := range d.configLines() {
		fmt.Fprintf(&b, "- %s\n", mdCell(l))
	}
	b.WriteString("\n")
	if len(d.Flips) > 0 {
		b.WriteString("| cell | flip | base | new | signature |\n|---|---|---|---|---|\n")
		for _, f := range d.Flips {
			fmt.Fprintf(&b, "| %s | **%s** | %s | %s | %s |\n", mdCell(f.Cell), f.label(), orNone(string(f.Base)), f.newText(), mdCell(clip(f.Signature, 200)))
		}
		b.WriteString("\n")
		notes := 0
		for _, f := range d.Flips {
			if f.Note != "" {
				fmt.Fprintf(&b, "- `%s`: %s\n", mdCell(f.Cell), mdCell(f.Note))
				notes++
			}
		}
		if notes > 0 {
			b.WriteString("\n")
		}
	}
	if len(d.Perf) > 0 {
		b.WriteString("Performance changes beyond 10% and outside both runs' spread:\n\n")
		b.WriteString("| " + strings.Join(perfChangeHeader, " | ") + " |\n|" + strings.Repeat("---|", len(perfChangeHeader)) + "\n")
		for _, p := range d.Perf {
			b.WriteString("| " + strings.Join(p.row(mdCell), " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	if len(d.Host) > 0 {
		b.WriteString("| host | base | new |\n|---|---|---|\n")
		for _, h := range d.Host {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(h.Field), mdCell(h.Base), mdCell(h.New))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DiffJSON renders a diff as JSON.
func DiffJSON(w io.Writer, d *Diff) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// ConfigChange is one difference between two runs' configs: something
// added (Op "+", New), removed ("-", Base) or changed ("~", Base and New).
type ConfigChange struct {
	// What is where in the config: "axis fp4_gemm", "server.command",
	// "server.env", "vars", "probes", "reference", "known", "exclude", ...
	What string `json:"what"`
	Op   string `json:"op"`
	Base string `json:"base,omitempty"`
	New  string `json:"new,omitempty"`
}

// String is the change's line in a diff: "config: axis fp4_gemm: +
// flashinfer_cudnn", "config: vars: tp: 8 -> 4".
func (c ConfigChange) String() string {
	switch c.Op {
	case "+":
		return fmt.Sprintf("config: %s: + %s", c.What, c.New)
	case "-":
		return fmt.Sprintf("config: %s: - %s", c.What, c.Base)
	}
	return fmt.Sprintf("config: %s: %s -> %s", c.What, c.Base, c.New)
}

// configChanges compares what run.json recorded of each run's config: the
// axes and their values, the config text (server command, environment,
// excludes, includes and the other settings), the vars, the probe set, the
// reference cell and the known issues. Both sides are compared in the
// redacted form bmx wrote, and what is shown is redacted again.
func configChanges(a, b *record.Run) ([]ConfigChange, []string) {
	var d configDiff
	var notes []string
	add, changed := d.add, d.changed
	// Axes and their values, as the runs resolved them.
	axesA, axesB := map[string][]string{}, map[string][]string{}
	for _, ax := range a.Axes {
		axesA[ax.Name] = ax.Values
	}
	for _, ax := range b.Axes {
		axesB[ax.Name] = ax.Values
	}
	for _, ax := range a.Axes {
		if _, ok := axesB[ax.Name]; !ok {
			add("axes", "-", ax.Name, "")
		}
	}
	for _, ax := range b.Axes {
		before, ok := axesA[ax.Name]
		if !ok {
			add("axes", "+", "", ax.Name+" ("+strings.Join(ax.Values, ", ")+")")
			continue
		}
		d.lists("axis "+ax.Name, before, ax.Values)
	}
	ca, errA := parseRecorded(a)
	cb, errB := parseRecorded(b)
	switch {
	case a.Config == "" && b.Config == "":
		notes = append(notes, "neither run recorded its config's text: only axes, vars, probes, reference and known issues are compared")
	case errA == nil && errB == nil:
		d.parsed(ca, cb)
	default:
		for _, x := range []struct {
			run *record.Run
			err error
		}{{a, errA}, {b, errB}} {
			if x.err != nil {
				notes = append(notes, fmt.Sprintf("the config of %s cannot be read by this bmx (%v): its text is compared line by line", x.run.Name, firstLine(x.err)))
			}
		}
		d.lists("text", configLinesOf(a.Config), configLinesOf(b.Config))
	}
	// Vars as the runs resolved them (the file's, the profile's and --var).
	d.maps("vars", a.Vars, b.Vars)
	// The probe set: a built-in set's name, or the probe file's path.
	changed("probes", a.ProbeSet, b.ProbeSet)
	if a.ProbeSet == b.ProbeSet && a.ProbeSet != "" && strings.ContainsAny(a.ProbeSet, "/.") {
		notes = append(notes, fmt.Sprintf("both runs probed with the file %s; run.json does not record its content, so a change in it does not show here", a.ProbeSet))
	}
	if errA != nil || errB != nil {
		// The resolved reference cell; a config read above compares the
		// reference key itself, which --only does not change.
		changed("reference", a.Reference, b.Reference)
	}
	d.lists("known", knownTexts(a.Known), knownTexts(b.Known))
	out := []ConfigChange{}
	for _, c := range d.out {
		c.Base, c.New = redactShown(c.Base), redactShown(c.New)
		out = append(out, c)
	}
	return out, notes
}

// configDiff collects the changes between two configs.
type configDiff struct {
	out []ConfigChange
}

func (d *configDiff) add(what, op, base, new string) {
	d.out = append(d.out, ConfigChange{What: what, Op: op, Base: base, New: new})
}

// changed adds "~" when a setting's text differs.
func (d *configDiff) changed(what, base, new string) {
	if base != new {
		d.add(what, "~", orNone(base), orNone(new))
	}
}

// lists adds each entry of base not in new ("-") and of new not in base
// ("+"), counting repeats.
func (d *configDiff) lists(what string, base, new []string) {
	removed, added := listDiff(base, new)
	for _, x := range removed {
		d.add(what, "-", x, "")
	}
	for _, x := range added {
		d.add(what, "+", "", x)
	}
}

// maps adds the keys of new not in base ("+ K=V"), of base not in new
// ("- K=V") and those whose value changed ("K=V1 -> K=V2"), by key.
func (d *configDiff) maps(what string, base, new map[string]string) {
	keys := slices.Sorted(maps.Keys(base))
	for k := range new {
		if _, ok := base[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, inA := base[k]
		vb, inB := new[k]
		switch {
		case !inA:
			d.add(what, "+", "", k+"="+vb)
		case !inB:
			d.add(what, "-", k+"="+va, "")
		case va != vb:
			d.add(what, "~", k+"="+va, k+"="+vb)
		}
	}
}

// parseRecorded reads a run's recorded config text as bmx reads a config.
func parseRecorded(r *record.Run) (*matrix.Config, error) {
	name := r.ConfigPath
	if name == "" {
		name = record.RunFile
	}
	return matrix.Parse(name, []byte(r.Config), r.Vars)
}

// parsed compares what only the config text holds.
func (d *configDiff) parsed(a, b *matrix.Config) {
	changed := d.changed
	changed("name", a.Name, b.Name)
	changed("engine", a.Engine, b.Engine)
	// How each axis passes its value, and what each value brings along.
	for _, axB := range b.Axes {
		i := slices.IndexFunc(a.Axes, func(x matrix.Axis) bool { return x.Name == axB.Name })
		if i < 0 {
			continue
		}
		axA := a.Axes[i]
		changed("axis "+axB.Name+" flag", axA.Flag, axB.Flag)
		changed("axis "+axB.Name+" env", axA.Env, axB.Env)
		for _, vb := range axB.Values {
			j := slices.IndexFunc(axA.Values, func(x matrix.Value) bool { return x.Name == vb.Name })
			if j < 0 {
				continue
			}
			va := axA.Values[j]
			what := "axis " + axB.Name + "=" + vb.Name
			d.lists(what+" args", argGroups(va.Args), argGroups(vb.Args))
			d.maps(what+" env", va.Env, vb.Env)
		}
	}
	sa, sb := a.Server, b.Server
	d.lists("server.command", argGroups(sa.Command), argGroups(sb.Command))
	d.maps("server.env", sa.Env, sb.Env)
	changed("server.host", sa.Host, sb.Host)
	changed("server.health", sa.Health, sb.Health)
	changed("server.ready_log", regexpText(sa.ReadyLog), regexpText(sb.ReadyLog))
	changed("server.ready_generate", fmt.Sprint(sa.ReadyGenerate), fmt.Sprint(sb.ReadyGenerate))
	changed("server.ready_timeout", sa.ReadyTimeout.String(), sb.ReadyTimeout.String())
	changed("server.probe_timeout", sa.ProbeTimeout.String(), sb.ProbeTimeout.String())
	changed("server.stop_grace", sa.StopGrace.String(), sb.StopGrace.String())
	changed("server.cell_timeout", sa.CellTimeout.String(), sb.CellTimeout.String())
	changed("server.help_command", strings.Join(sa.HelpCommand, " "), strings.Join(sb.HelpCommand, " "))
	changed("server.versions_command", strings.Join(sa.VersionsCommand, " "), strings.Join(sb.VersionsCommand, " "))
	d.lists("exclude", mapTexts(a.Exclude), mapTexts(b.Exclude))
	d.lists("include", includeTexts(a.Include), includeTexts(b.Include))
	changed("reference", mapText(a.Reference), mapText(b.Reference))
	changed("probes.model", a.Probes.Model, b.Probes.Model)
	changed("retries", fmt.Sprint(a.Retries), fmt.Sprint(b.Retries))
	changed("order", a.Order, b.Order)
	changed("prune", fmt.Sprint(a.Prune), fmt.Sprint(b.Prune))
	changed("prune_after", fmt.Sprint(a.PruneAfter), fmt.Sprint(b.PruneAfter))
	changed("help_check", fmt.Sprint(a.HelpCheck), fmt.Sprint(b.HelpCheck))
	slots := func(c *matrix.Config) string {
		var s []string
		for _, sl := range c.Slots {
			s = append(s, sl.GPUs)
		}
		return strings.Join(s, " ")
	}
	changed("slots", slots(a), slots(b))
}

// listDiff is what of a is not in b (removed) and what of b is not in a
// (added), counting repeats, each in its list's order.
func listDiff(a, b []string) (removed, added []string) {
	return minus(a, b), minus(b, a)
}

// minus is a without the elements of b, counted with repeats, in a's order.
func minus(a, b []string) []string {
	count := map[string]int{}
	for _, x := range b {
		count[x]++
	}
	var out []string
	for _, x := range a {
		if count[x] > 0 {
			count[x]--
			continue
		}
		out = append(out, x)
	}
	return out
}

// argGroups groups an argv as it reads: a flag with the value that follows
// it ("--tp 8"), other words alone, so a changed value shows as one flag
// removed and one added.
func argGroups(argv []string) []string {
	argv = matrix.RedactArgv(argv)
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
			a += " " + argv[i+1]
			i++
		}
		out = append(out, a)
	}
	return out
}

// mapTexts are axis=value maps written "a=x,b=y", keys sorted.
func mapTexts(ms []map[string]string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, mapText(m))
	}
	return out
}

// mapText is m as "k=v,k=v", sorted by key.
func mapText(m map[string]string) string {
	return strings.Join(matrix.Pairs(m), ",")
}

func includeTexts(incs []matrix.Include) []string {
	var out []string
	for _, inc := range incs {
		s := mapText(inc.Values)
		if len(inc.Args) > 0 {
			s += " args " + strings.Join(matrix.RedactArgv(inc.Args), " ")
		}
		if len(inc.Env) > 0 {
			s += " env " + strings.Join(matrix.RedactEnv(matrix.Pairs(inc.Env)), " ")
		}
		out = append(out, s)
	}
	return out
}

// knownTexts are the known issues written "moe=x,fp4=y: crash (issue)".
func knownTexts(ks []matrix.Known) []string {
	var out []string
	for _, k := range ks {
		s := mapText(k.Match) + ": "
		if k.Verdict != "" {
			s += k.Verdict
		} else {
			s += "any failure"
		}
		if k.Issue != "" {
			s += " (" + k.Issue + ")"
		}
		out = append(out, s)
	}
	return out
}

func regexpText(re *regexp.Regexp) string {
	if re == nil {
		return ""
	}
	return re.String()
}

// configLinesOf are a config text's lines that say something: comments and
// blank lines left out, spaces trimmed.
func configLinesOf(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// redactShown hides a secret that got this far: "NAME=value" with a
// secret-looking name, and key-shaped values.
func redactShown(s string) string {
	if k, _, ok := strings.Cut(s, "="); ok && !strings.ContainsAny(k, " ,") && matrix.SecretName(k) {
		return k + "=" + matrix.Redacted
	}
	return matrix.RedactShapes(s)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
