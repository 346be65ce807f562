package reports

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Performance is a run's serving figures: one row per correct or degraded
// cell the performance probe measured, fastest first, and which correct
// cell to deploy.
//
// Cells are ranked by output tokens per second per request, time to first
// token included, at the highest concurrency measured (what each user gets
// from a loaded server), with the spread over the repeated requests. The
// fastest correct cell is crowned only when it beats the runner-up by more
// than the noise: their spreads within the start apart, and its median more
// than NoiseFloorPct ahead, the between-start noise (two starts of one
// server differ by more than one start's requests show). Otherwise no cell
// is crowned: WithinNoise names the cells within noise of the fastest.
type Performance struct {
	// PromptTokens and OutputTokens are the asked-for lengths (the first
	// measured cell's; every cell of a run is asked the same).
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
	// Concurrency is the level cells are ranked at; Levels all measured.
	Concurrency int   `json:"concurrency"`
	Levels      []int `json:"levels"`
	// NoiseFloorPct is the between-start noise floor applied (the first
	// measured cell's [perf] noise_floor_pct).
	NoiseFloorPct float64   `json:"noise_floor_pct"`
	Cells         []PerfRow `json:"cells"`
	// Fastest is the fastest correct cell, "" when none is measured or
	// when the top ones are within noise (see WithinNoise).
	Fastest string `json:"fastest,omitempty"`
	// WithinNoise are the fastest correct cell and those within noise of
	// it (spreads overlapping, or medians within the noise floor), when
	// there are two or more.
	WithinNoise []string `json:"within_noise,omitempty"`
	// Recommendation is the lines to print: the fastest correct cell and
	// its flags ready to paste, or the cells within noise with theirs,
	// and degraded cells that are faster.
	Recommendation []string `json:"recommendation"`
	rec            []recLine
}

// recLine is one line of the recommendation: text, and flags to paste.
type recLine struct{ Text, Flags string }

// PerfRow is one measured cell.
type PerfRow struct {
	Cell    string           `json:"cell"`
	Verdict classify.Verdict `json:"verdict"`
	// Flags are the cell's own server arguments (its axis values), and
	// Env its own environment, shell-quoted and secret-redacted.
	Flags string `json:"flags"`
	Env   string `json:"env,omitempty"`
	// Rank is tokens/s per request, TTFT included, at the ranking
	// concurrency (zero when the cell has no figures there).
	Rank     evidence.Spread `json:"rank_tokens_per_s_incl_ttft"`
	Problems []string        `json:"problems,omitempty"`
	Perf     *evidence.Perf  `json:"-"`
	// ShapeOnly marks a correct cell judged by the shape of its text only:
	// a recommendation of it says so.
	ShapeOnly bool `json:"shape_only,omitempty"`
}

// shapeOnlyCaveat follows a recommended cell that nothing vouches for.
const shapeOnlyCaveat = " (correct*: judged by shape only, nothing shows its answers are right)"

// caveat is what follows the row's name in a recommendation.
func (r PerfRow) caveat() string {
	if r.ShapeOnly && r.Verdict == classify.Correct {
		return shapeOnlyCaveat
	}
	return ""
}

// measured reports whether a result's performance figures belong in the
// performance table: only cells whose answers are right are worth timing.
func measured(r record.Result) bool {
	return r.Perf != nil && (r.Verdict == classify.Correct || r.Verdict == classify.Degraded)
}

// Performance returns the run's performance section, or nil when no
// correct or degraded cell was measured.
func PerformanceOf(rep *record.Report) *Performance {
	var rows []PerfRow
	levels := map[int]bool{}
	p := &Performance{Cells: []PerfRow{}, Recommendation: []string{}}
	for _, r := range rep.Results {
		if !measured(r) {
			continue
		}
		if len(rows) == 0 {
			p.PromptTokens, p.OutputTokens = r.Perf.PromptTokens, r.Perf.OutputTokens
			p.NoiseFloorPct = evidence.DefaultNoiseFloorPct
			if f := r.Perf.NoiseFloorPct; f != nil {
				p.NoiseFloorPct = *f
			}
		}
		for _, l := range r.Perf.Levels {
			levels[l.Concurrency] = true
			if l.Requests > 0 {
				p.Concurrency = max(p.Concurrency, l.Concurrency)
			}
		}
		flags, env := cellFlags(r.Cell)
		rows = append(rows, PerfRow{Cell: r.Cell.ID, Verdict: r.Verdict, Flags: flags, Env: env, Problems: r.Perf.Problems, Perf: r.Perf, ShapeOnly: r.ShapeOnly})
	}
	if len(rows) == 0 {
		return nil
	}
	p.Levels = slices.Sorted(maps.Keys(levels))
	for i := range rows {
		if l := rows[i].Perf.Level(p.Concurrency); l != nil && l.Requests > 0 {
			rows[i].Rank = l.TokensPerSecond
		}
	}
	slices.SortStableFunc(rows, func(a, b PerfRow) int { return cmp.Compare(b.Rank.Median, a.Rank.Median) })
	p.Cells = rows
	p.recommend()
	if n := sharedCPU(rep); n != "" {
		p.rec = append(p.rec, recLine{Text: n})
		p.Recommendation = append(p.Recommendation, n)
	}
	return p
}

// sharedCPU is a note when the measured cells' servers may have shared the
// CPU: more than one slot ran at once, on a host with fewer CPUs than the
// slots times the threads each server was told to use (one where its
// command line does not say). The figures of cells measured at the same
// time then slowed each other; "" when they could not have.
func sharedCPU(rep *record.Report) string {
	slots, cpus := len(rep.Run.Slots), rep.Run.Host.CPUs
	if slots < 2 || cpus < 1 {
		return ""
	}
	threads := 1
	for _, r := range rep.Results {
		if measured(r) {
			threads = max(threads, matrix.ServerThreads(r.Argv))
		}
	}
	if slots*threads <= cpus {
		return ""
	}
	return fmt.Sprintf("note: these figures share the CPU: %d slots ran servers of %d thread(s) each at once on %d CPUs, so cells measured at the same time slowed each other; measure with --slots 1 to compare cells",
		slots, threads, cpus)
}

// maxTiedFlags bounds the flag blocks a recommendation prints for cells
// within noise of each other: the three fastest; more is a wall of flags.
const maxTiedFlags = 3

// withinNoise reports whether the fastest cell's rate best fails to beat
// r's by more than the noise: their min-max spreads overlap (the noise
// within one start), or best's median is at most floorPct percent above
// r's (the noise between starts).
func withinNoise(best, r evidence.Spread, floorPct float64) bool {
	return best.Overlaps(r) || best.Median <= r.Median*(1+floorPct/100)
}

// recommend picks the fastest correct cell, or the correct cells within
// noise of it, and writes the recommendation.
func (p *Performance) recommend() {
	defer func() {
		for _, l := range p.rec {
			if l.Flags != "" {
				l.Text += ": " + l.Flags
			}
			p.Recommendation = append(p.Recommendation, l.Text)
		}
	}()
	var correct []PerfRow
	for _, r := range p.Cells {
		if r.Verdict == classify.Correct && r.Rank.Median > 0 {
			correct = append(correct, r)
		}
	}
	at := fmt.Sprintf("tok/s per request incl. TTFT at concurrency %d", p.Concurrency)
	if len(correct) == 0 {
		p.rec = append(p.rec, recLine{Text: "no correct cell has performance figures: nothing to recommend"})
		return
	}
	best := correct[0]
	var tied []PerfRow
	for _, r := range correct[1:] {
		if withinNoise(best.Rank, r.Rank, p.NoiseFloorPct) {
			tied = append(tied, r)
		}
	}
	floor := fmt.Sprintf("the %s%% between-start noise floor", pct(p.NoiseFloorPct))
	if len(tied) == 0 {
		p.Fastest = best.Cell
		margin := "; the only correct cell measured"
		if len(correct) > 1 {
			next := correct[1]
			margin = fmt.Sprintf("; %s%% ahead of %s, beyond both spreads and %s", pct(100*(best.Rank.Median/next.Rank.Median-1)), next.Cell, floor)
		}
		p.rec = append(p.rec,
			recLine{Text: fmt.Sprintf("fastest correct cell: %s%s, %s %s%s", best.Cell, best.caveat(), rankText(best.Rank), at, margin)},
			recLine{Text: "recommended flags", Flags: best.command()})
	} else {
		tied = append([]PerfRow{best}, tied...)
		var names []string
		for _, r := range tied {
			p.WithinNoise = append(p.WithinNoise, r.Cell)
			names = append(names, r.Cell)
		}
		shown := names[:min(len(names), maxTiedFlags)]
		if n := len(names) - len(shown); n > 0 {
			shown = append(slices.Clone(shown), fmt.Sprintf("%d more", n))
		}
		p.rec = append(p.rec, recLine{Text: fmt.Sprintf("within noise, no single fastest correct cell: %d correct cells tie (%s): the fastest, %s %s, is not ahead of them by more than the spreads and %s (perf.noise_floor_pct)",
			len(tied), strings.Join(shown, "; "), num(best.Rank.Median), at, floor)})
		for _, r := range tied[:min(len(tied), maxTiedFlags)] {
			p.rec = append(p.rec, recLine{Text: fmt.Sprintf("flags of %s%s, %s tok/s per request incl. TTFT", r.Cell, r.caveat(), rankText(r.Rank)), Flags: r.command()})
		}
		if n := len(tied) - maxTiedFlags; n > 0 {
			p.rec = append(p.rec, recLine{Text: fmt.Sprintf("the %d other cells within noise are in the performance table, their flags in their sections", n)})
		}
	}
	for _, r := range p.Cells {
		if r.Verdict == classify.Degraded && r.Rank.Min > best.Rank.Max {
			p.rec = append(p.rec, recLine{Text: fmt.Sprintf("note: %s is faster, %s tok/s per request incl. TTFT, but degraded: its numerics diverge from the reference cell's", r.Cell, rankText(r.Rank))})
		}
	}
}

// command is the row's flags ready to paste into the server's command
// line, and its environment after them.
func (r PerfRow) command() string {
	switch {
	case r.Env != "" && r.Flags != "":
		return r.Flags + "  (environment: " + r.Env + ")"
	case r.Env != "":
		return "(no flags; environment: " + r.Env + ")"
	case r.Flags == "":
		return "(none: the cell adds no flags to the server's defaults)"
	}
	return r.Flags
}

// rankText is "651 (640-660)": a median and its min-max spread.
func rankText(s evidence.Spread) string {
	return fmt.Sprintf("%s (%s-%s)", num(s.Median), num(s.Min), num(s.Max))
}

// num formats a figure with about three significant digits.
func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// pct formats a percentage: 5, 2.5, 31.
func pct(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f", x)
	}
	return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64)
}

// cellFlags are a cell's own arguments and environment, redacted and
// quoted for a shell.
func cellFlags(c matrix.Cell) (flags, env string) {
	if kv := matrix.Pairs(c.Env); len(kv) > 0 {
		env = matrix.ShellJoin(matrix.RedactEnv(kv))
	}
	return matrix.ShellJoin(matrix.RedactArgv(c.Args)), env
}

// perfLine is one row of the performance table: a cell at one
// concurrency, its figures formatted.
type perfLine struct {
	Cell, Verdict                                       string
	First                                               bool // the cell's first level
	Concurrency, Requests, Failed                       int
	TTFT, TTFTP90, TPOT, Decode, PerRequest, Total, Req string
}

// lines flattens the table: a line per cell and level, fastest cell first.
func (p *Performance) lines() []perfLine {
	var out []perfLine
	for _, r := range p.Cells {
		for i, l := range r.Perf.Levels {
			pl := perfLine{Cell: r.Cell, Verdict: string(r.Verdict), First: i == 0, Concurrency: l.Concurrency, Requests: l.Requests, Failed: l.Failed,
				TTFT: "-", TTFTP90: "-", TPOT: "-", Decode: "-", PerRequest: "-", Total: "-"}
			pl.Req = fmt.Sprint(l.Requests)
			if l.Failed > 0 {
				pl.Req += fmt.Sprintf(" (%d failed)", l.Failed)
			}
			if l.Requests > 0 {
				pl.TTFT = fmt.Sprintf("%s (%s-%s)", num(l.TTFTMS.Median), num(l.TTFTMS.Min), num(l.TTFTMS.Max))
				pl.TTFTP90 = num(l.TTFTMS.P90)
				if l.TPOTMS.Median > 0 {
					pl.TPOT, pl.Decode = num(l.TPOTMS.Median), num(l.DecodeTokensPerSecond.Median)
				}
				pl.PerRequest = fmt.Sprintf("%s (%s-%s)", num(l.TokensPerSecond.Median), num(l.TokensPerSecond.Min), num(l.TokensPerSecond.Max))
				pl.Total = num(l.TotalTokensPerSecond)
			}
			out = append(out, pl)
		}
	}
	return out
}

// perfHeader names the performance table's columns.
var perfHeader = []string{"cell", "verdict", "concurrency", "requests", "TTFT ms (min-max)", "TTFT p90 ms", "TPOT ms", "decode tok/s per request", "tok/s per request incl. TTFT (min-max)", "tok/s total"}

// tpotCaption explains TPOT and the decode rate; a table too narrow for
// the TPOT column leaves it out of its caption.
const tpotCaption = "; TPOT = (end-to-end - TTFT) / (tokens - 1), decode tok/s its inverse: the rate after the first token"

// caption says what the performance table measured.
func (p *Performance) caption() string {
	return fmt.Sprintf("streamed chat completions, %d-token prompt, %d tokens out, after one warm-up request; medians over the requests, spread min-max%s; tok/s per request = tokens over end-to-end time, TTFT included; cells ranked by it at concurrency %d, the fastest crowned only when more than its spread and %s%% (between-start noise) ahead",
		p.PromptTokens, p.OutputTokens, tpotCaption, p.Concurrency, pct(p.NoiseFloorPct))
}

// problemLines are the cells' performance problems, one line each.
func (p *Performance) problemLines() []string {
	var out []string
	for _, r := range p.Cells {
		for _, pr := range r.Problems {
			out = append(out, r.Cell+": "+pr)
		}
	}
	return out
}
