package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/browsertest"
	"github.com/bmx-dev/bmx/internal/record"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// richFixture is the fixture with what the HTML report must show besides
// verdicts: hang forensics, a teardown that went wrong, a two-GPU slot, a
// known issue whose note holds a link and a script URL, a config snapshot,
// cell IDs with spaces, slashes and punctuation that a naive anchor would
// merge, and long unbroken strings that must wrap on a phone.
func richFixture() *record.Report {
	rep := fixture()
	t0 := rep.Run.Started
	rep.Run.Name = "rich"
	rep.Run.Config = "name = \"fixture\"\n[server]\nenv = { HF_TOKEN = \"<redacted>\" }\ncommand = [\"python3\", \"" + strings.Repeat("x", 300) + "\"]\n"
	rep.Run.Vars = map[string]string{"model": "/models/m", "token": "<redacted>"}
	rep.Run.Slots = []string{"0", "1,2"}
	rep.Run.Resumed = 1
	rep.Run.Notes = []string{"a run note"}
	rep.Run.Host.GPUs = append(rep.Run.Host.GPUs, record.GPU{Index: 1, Name: "NVIDIA H200"}, record.GPU{Index: 2, Name: "NVIDIA H200"})
	rep.Run.Known[0].Note = "trtllm MoE is SM100-only, see https://example.org/notes/7. Not a link: javascript:alert(1) nor www.example.org"
	for i := range rep.Results {
		r := &rep.Results[i]
		r.Slot = "0"
		switch r.Verdict {
		case classify.Hang:
			r.Slot = "1,2"
			r.Started, r.Ended = t0, t0.Add(90*time.Minute)
			r.TimedOut = true
			r.Stop = "SIGKILL after 5s grace (SIGTERM ignored)"
			r.Timings = record.Timings{StopMS: 5012, GPUWaitMS: 2500, TotalMS: 90 * 60 * 1000}
			r.Forensics = &evidence.Forensics{PIDs: []int{4242, 4243},
				PySpy:     []evidence.StackDump{{PID: 4242, Output: "Thread 4242 (idle): \"MainThread\"\n    capture (cuda_graph_runner.py:311)\n" + strings.Repeat("Z", 400)}},
				NvidiaSMI: "| 1  NVIDIA H200  |  81234MiB / 143771MiB |  100% |",
				Notes:     []string{"py-spy took 2.1 s"}}
		case classify.Crash:
			r.Orphans = 2
			r.Problems = []string{"GPU memory was still held when the server's processes were gone (GPU 0: 8811 MiB)"}
			r.Fatal = "CUDA error: no kernel image is available for execution on the device"
			r.Exit = &evidence.Exit{Signal: "SIGKILL"}
			r.LogTail = "Traceback (most recent call last):\n  " + strings.Repeat("/very/long/path/segment", 30) + "\nbase64:" + strings.Repeat("QUJD", 200)
		case classify.Garbage:
			r.Probes = append(r.Probes, classify.ProbeVerdict{Name: "regex", Verdict: classify.Wrong,
				Reason: `expected /^(?:` + strings.Repeat(`alpha|beta|gamma|`, 40) + `omega)$/ got nothing`})
		}
	}
	// IDs that a character-replacing anchor would merge: "a b/c" and
	// "a_b_c" (same length, same letters).
	odd := func(v string) record.Result {
		c := matrix.Cell{ID: "moe=" + v + ",fp4=cudnn", Values: []matrix.AxisValue{{Axis: "moe", Value: v}, {Axis: "fp4", Value: "cudnn"}}}
		return record.Result{Cell: c, Verdict: classify.Wrong, Reason: "wrong", Observations: []evidence.Observation{}, Started: t0, Ended: t0.Add(time.Second), Slot: "0"}
	}
	rep.Run.Axes[0].Values = append(rep.Run.Axes[0].Values, "a b/c", "a_b_c")
	rep.Results = append(rep.Results, odd("a b/c"), odd("a_b_c"))
	return rep
}

func renderHTML(t *testing.T, rep *record.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	idRe   = regexp.MustCompile(`\sid="([^"]*)"`)
	hrefRe = regexp.MustCompile(`<a href="([^"]*)"([^>]*)>`)
	tdRe   = regexp.MustCompile(`<td class="v v-([a-z]+)">(.*?)</td>`)
)

func TestHTMLLinksAndAnchors(t *testing.T) {
	s := renderHTML(t, richFixture())
	ids := map[string]int{}
	for _, m := range idRe.FindAllStringSubmatch(s, -1) {
		ids[m[1]]++
		if m[1] == "" || strings.ContainsAny(m[1], " \t\n,=/") {
			t.Errorf("id %q is not a plain token", m[1])
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("id %q used %d times", id, n)
		}
	}
	var external []string
	for _, m := range hrefRe.FindAllStringSubmatch(s, -1) {
		href := html.UnescapeString(m[1])
		if frag, ok := strings.CutPrefix(href, "#"); ok {
			if ids[frag] != 1 {
				t.Errorf("link to #%s, which is not an id on the page", frag)
			}
			continue
		}
		external = append(external, href)
		if !strings.Contains(m[2], `rel="noopener"`) {
			t.Errorf("external link %s without rel=noopener", href)
		}
	}
	// The fixture's issue URL (in the known-issues table, and in the cell
	// it matched; the hang's own entry has none) and the URL in the note;
	// nothing else.
	want := map[string]int{"https://example.org/issues/1": 2, "https://example.org/notes/7": 2}
	got := map[string]int{}
	for _, u := range external {
		got[u]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("external links %v, want %v", got, want)
	}
	if strings.Contains(s, `href="javascript`) || strings.Contains(s, `href="www.`) {
		t.Error("a non-http URL became a link")
	}
	// Two cells whose IDs differ only in punctuation have their own
	// sections, and each grid cell links to the section of its cell.
	for _, id := range []string{"moe=a b/c,fp4=cudnn", "moe=a_b_c,fp4=cudnn"} {
		a := cellAnchor(id)
		if ids[a] != 1 || !strings.Contains(s, `<details id="`+a+`">`) {
			t.Errorf("cell %s: no section %s", id, a)
		}
	}
	if cellAnchor("moe=a b/c,fp4=cudnn") == cellAnchor("moe=a_b_c,fp4=cudnn") {
		t.Error("anchors collide")
	}
	grid := s[strings.Index(s, `<table id="grid">`):]
	grid = grid[:strings.Index(grid, "</table>")]
	cells := tdRe.FindAllStringSubmatch(grid, -1)
	if len(cells) != 4*3 {
		t.Fatalf("%d grid cells", len(cells))
	}
	for _, c := range cells {
		linked := strings.Contains(c[2], `<a href="#cell-`)
		if ran := c[1] != "none" && c[1] != "excluded"; ran != linked {
			t.Errorf("grid cell %s: linked %v", c[2], linked)
		}
	}
}

func TestHTMLKnownMarks(t *testing.T) {
	s := renderHTML(t, richFixture())
	grid := s[strings.Index(s, `<table id="grid">`):]
	grid = grid[:strings.Index(grid, "</table>")]
	marks := map[string]string{}
	for _, c := range tdRe.FindAllStringSubmatch(grid, -1) {
		m := regexp.MustCompile(`#(cell-[^"]*)".*class="k k-([a-z]+)"`).FindStringSubmatch(c[2])
		if m != nil {
			marks[m[1]] = c[1] + " " + m[2]
		}
	}
	want := map[string]string{
		cellAnchor("moe=cutlass,fp4=cudnn"):   "correct xpass",      // matches a known nan: fixed
		cellAnchor("moe=cutlass,fp4=cutlass"): "nan unexpected",     // no known issue
		cellAnchor("moe=cutlass,fp4=trtllm"):  "crash unexpected",   // no known issue
		cellAnchor("moe=trtllm,fp4=cudnn"):    "garbage unexpected", // known crash, failing otherwise: changed
		cellAnchor("moe=trtllm,fp4=cutlass"):  "hang xfail",         // known hang
		cellAnchor("moe=a b/c,fp4=cudnn"):     "wrong unexpected",   // no known issue
		cellAnchor("moe=a_b_c,fp4=cudnn"):     "wrong unexpected",   // no known issue
	}
	if fmt.Sprint(marks) != fmt.Sprint(want) {
		t.Errorf("grid marks\n got %v\nwant %v", marks, want)
	}
	for _, legend := range []string{`<span class="k k-xfail">known</span>`, `<span class="k k-unexpected">unexpected</span>`, `<span class="k k-unexpected">changed</span>`, `<span class="k k-xpass">xpass</span>`} {
		if !strings.Contains(s, legend) {
			t.Errorf("no legend entry %s", legend)
		}
	}
	if !strings.Contains(s, "Known issue (CHANGED, expected crash): <code>moe=<wbr>trtllm</code> is expected to end as crash: trtllm MoE is SM100-only") {
		t.Error("the garbage cell does not say which known issue it matched and what it expects")
	}
}

// TestHTMLVerdictStyles checks that every verdict has its own glyph and its
// own colours, that nan and crash differ in lightness (so in greyscale),
// and that the legend shows each.
func TestHTMLVerdictStyles(t *testing.T) {
	s := renderHTML(t, richFixture())
	all := append(append([]classify.Verdict{}, classify.Verdicts...), classify.Skipped, classify.Excluded, classify.Predicted)
	glyphs := map[string]classify.Verdict{}
	colours := map[string]classify.Verdict{}
	luminance := map[classify.Verdict]float64{}
	css := regexp.MustCompile(`\.v-([a-z]+) \{ background: ([^;]+); color: (#[0-9a-f]{6});`)
	styles := map[string][2]string{}
	for _, m := range css.FindAllStringSubmatch(s, -1) {
		styles[m[1]] = [2]string{m[2], m[3]}
	}
	for _, v := range all {
		g := verdictGlyphs[string(v)]
		if g == "" {
			t.Errorf("%s has no glyph", v)
		}
		if other, ok := glyphs[g]; ok {
			t.Errorf("%s and %s share the glyph %s", v, other, g)
		}
		glyphs[g] = v
		st, ok := styles[string(v)]
		if !ok {
			t.Errorf("%s has no colours", v)
			continue
		}
		if other, ok := colours[st[0]+st[1]]; ok {
			t.Errorf("%s and %s share the colours %v", v, other, st)
		}
		colours[st[0]+st[1]] = v
		if strings.HasPrefix(st[0], "#") {
			luminance[v] = relLuminance(st[0])
		}
		if !strings.Contains(s, `<li><span class="v v-`+string(v)+`">`+string(v)+`</span>`) {
			t.Errorf("the legend lacks %s", v)
		}
		if !strings.Contains(s, `.v-`+string(v)+`::before { content: "`+g+`"; }`) {
			t.Errorf("the style sheet does not mark %s with %s", v, g)
		}
	}
	if d := math.Abs(luminance[classify.NaN] - luminance[classify.Crash]); d < 0.3 {
		t.Errorf("nan and crash backgrounds differ in luminance by %.2f only", d)
	}
	for _, want := range []string{`<td class="v v-nan"><a href="#` + cellAnchor("moe=cutlass,fp4=cutlass"), `.v-nan::before { content: "∞"; }`, `.v-crash::before { content: "↯"; }`} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// relLuminance is WCAG's relative luminance of "#rrggbb".
func relLuminance(hex string) float64 {
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		n, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		c := float64(n) / 255
		if c <= 0.03928 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

func TestHTMLRunAndCellDetails(t *testing.T) {
	rep := richFixture()
	s := renderHTML(t, rep)
	// GPU-hours: the hang cell ran 90 minutes on the two GPUs of slot
	// "1,2"; the other six ran a second each on slot "0".
	gpu := 90*time.Minute*2 + 6*time.Second
	for _, want := range []string{
		"<tr><th>wall time</th><td>1m0s from start to end (resumed 1 time: the time between the runs counts)</td></tr>",
		fmt.Sprintf(`<td id="gpu-hours">%.2f GPU-hours <span class="muted">(`, gpu.Hours()),
		"slot 0 = 1 GPU; slot 1,2 = 2 GPUs), summed over the 7 cells",
		// The config, collapsed, redacted as recorded, with its variables.
		`<details id="config"><summary>Config snapshot (4 lines), secrets redacted when the run was recorded</summary>`,
		"HF_TOKEN = &#34;&lt;redacted&gt;&#34;", "<td><code>token</code></td><td><code>&lt;redacted&gt;</code></td>",
		"<tr><th>note</th><td class=\"muted\">a run note</td></tr>",
		// Hang forensics.
		"<h3>Hang forensics</h3>", "processes 4242, 4243", "py-spy dump of pid 4242:", "capture (cuda_graph_runner.py:311)",
		"<p>nvidia-smi:</p><pre>| 1  NVIDIA H200  |  81234MiB / 143771MiB |  100% |</pre>", "py-spy took 2.1 s",
		// Teardown.
		"<tr><th>stopped with</th><td>SIGKILL after 5s grace (SIGTERM ignored)</td></tr>",
		"<tr><th>stop took</th><td>5.01 s, of which 2.5 s waiting for the GPU memory to be free</td></tr>",
		"<tr><th>escaped processes</th><td>2, killed after the process group</td></tr>",
		"<tr><th>fatal log line</th><td>CUDA error: no kernel image",
		"GPU memory was still held when the server&#39;s processes were gone",
		"Ran on GPUs 1,2, 12:00:00 to 13:30:00 UTC: never ready, stop 5.01 s, total 1h30m0s",
		"; exit: killed by SIGKILL.</p>",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(s, "<details open") {
		t.Error("a section is open by default")
	}
	for _, bad := range []string{"<script", "<link", "@import", "src=", "url(http"} {
		if strings.Contains(s, bad) {
			t.Errorf("the page is not self-contained: %s", bad)
		}
	}
}

// layoutProbe opens every cell's section and reports to the page around
// it (the page runs in an iframe of the width under test: headless
// Chromium's --dump-dom lays out at least 500 px wide), for the laid-out
// page, the viewport width, the page's scroll width, and every element
// that reaches past the viewport's edges outside a horizontal scroller
// (a .scroll box, which must itself fit).
// view is one page of TestHTMLLayoutInBrowser at one width.
type view struct {
	page  string
	width int
}

// attr is the attribute of the wrapper page under which the probe of this
// page at this width reports.
func (v view) attr() string { return fmt.Sprintf("data-layout-%s-%d", v.page, v.width) }

// probe is layoutProbe reporting under v's own attribute.
func (v view) probe() string {
	return strings.Replace(layoutProbe, `"data-layout"`, strconv.Quote(v.attr()), 1)
}

const layoutProbe = `<script>
` + browsertest.OverflowJS + `out.glyphs = {};
for (const e of document.querySelectorAll("#legend .v")) out.glyphs[e.textContent] = getComputedStyle(e, "::before").content;
for (const a of document.querySelectorAll("#grid a")) { out.links++; if (!document.getElementById(a.getAttribute("href").slice(1))) out.dangling.push(a.getAttribute("href")); }
parent.document.body.setAttribute("data-layout", JSON.stringify(out));
</script>`

// TestHTMLLayoutInBrowser renders the rich fixture and the real H200 run
// of examples/torch-gpu in headless Chromium at a phone's width (390 px)
// and a desktop's (1280 px), every cell's section open, and checks that
// nothing reaches past the page's edge: long regexes, tracebacks, base64
// and command lines wrap, and wide tables scroll in their own box. It
// saves each page and a screenshot of it at each width into
// $BMX_SCREENSHOTS when set (for a person to look at); unset, only the
// screenshot of the wrapper page that laid them out is checked (the same
// browser start: laidOut).
func TestHTMLLayoutInBrowser(t *testing.T) {
	t.Parallel()
	dom, pages, views := laidOut(t)
	shots := os.Getenv("BMX_SCREENSHOTS")
	// Screenshots work: the laying-out start took one of the wrapper page,
	// a PNG of its window.
	if shot := inBrowser.shot; inBrowser.shotErr != nil || shot.Width != 1400 || shot.Height != 1000 {
		t.Errorf("the screenshot of the laid-out pages: %dx%d px, %v", shot.Width, shot.Height, inBrowser.shotErr)
	}
	for _, v := range views {
		name, w := v.page, v.width
		m := regexp.MustCompile(v.attr() + `="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%s at %d px: the layout probe did not run", name, w)
		}
		var got struct {
			VW, SW   float64
			Over     []string
			Links    int
			Dangling []string
			Glyphs   map[string]string
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
			t.Fatalf("%v: %s", err, m[1])
		}
		t.Logf("%s at %d px: viewport %.0f, page %.0f wide, %d grid links", name, w, got.VW, got.SW, got.Links)
		if got.VW > float64(w) || got.VW < float64(w)-20 {
			t.Errorf("%s: the viewport is %.0f px, asked for %d", name, got.VW, w)
		}
		if got.SW > got.VW {
			t.Errorf("%s at %d px: the page scrolls sideways (%.0f px wide)", name, w, got.SW)
		}
		for i, o := range got.Over {
			if i == 10 {
				t.Errorf("%s at %d px: and %d more elements past the edge", name, w, len(got.Over)-i)
				break
			}
			t.Errorf("%s at %d px: past the edge: %s", name, w, o)
		}
		// Each verdict of the legend is drawn with its own glyph.
		seen := map[string]string{}
		for v, g := range got.Glyphs {
			if want := strconv.Quote(verdictGlyphs[v]); g != want {
				t.Errorf("%s: %s is drawn with %s, want %s", name, v, g, want)
			}
			if other, ok := seen[g]; ok {
				t.Errorf("%s: %s and %s are drawn with the same glyph %s", name, v, other, g)
			}
			seen[g] = v
		}
		if len(got.Glyphs) != 12 {
			t.Errorf("%s: legend glyphs %v", name, got.Glyphs)
		}
		if got.Links < 6 || len(got.Dangling) > 0 {
			t.Errorf("%s: %d grid links, dangling %v", name, got.Links, got.Dangling)
		}
		if shots == "" {
			continue // a browser start each: the wrapper's screenshot checks they work
		}
		plain := filepath.Join(shots, "bmx-report-"+name+".html")
		if err := os.WriteFile(plain, []byte(pages[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(shots, fmt.Sprintf("bmx-report-%s-%d.png", name, w))
		browsertest.Run(t, browsertest.Find(t), filepath.Join(t.TempDir(), "profile"), "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", w, map[int]int{390: 844, 1280: 900}[w]), "file://"+plain)
		if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
			t.Errorf("no screenshot %s: %v", shot, err)
		}
	}
}
