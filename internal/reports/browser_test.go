package reports

import (
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bmx-dev/bmx/internal/browsertest"
	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// inBrowser is what the package's one headless Chromium start laid out
// (--dump-dom) and took a screenshot of, shared by TestHTMLInBrowser and TestHTMLLayoutInBrowser: every
// page at every width is an iframe of one wrapper page, each reporting into
// the wrapper under an attribute of its own (a browser start costs more
// CPU than laying out another page).
var inBrowser struct {
	once sync.Once
	ok   bool
	// dom is the wrapper page as Chromium dumped it.
	dom string
	// pages are the pages as bmx wrote them, by name: "chart" (the
	// fixture with the performance chart), "rich" and "h200".
	pages map[string]string
	// views are TestHTMLLayoutInBrowser's pages at each width.
	views []view
	// shot is the screenshot the same start took of the wrapper page
	// (--screenshot beside --dump-dom), its size or why there is none.
	shot    image.Config
	shotErr error
}

// laidOut returns the package's browser run, running it for the first test
// that asks; a failure fails that test, and those after it say so.
func laidOut(t *testing.T) (dom string, pages map[string]string, views []view) {
	t.Helper()
	browser := browsertest.Find(t)
	inBrowser.once.Do(func() { layOutAll(t, browser) })
	if !inBrowser.ok {
		t.Fatal("the package's headless Chromium run failed: see the test that ran it")
	}
	return inBrowser.dom, inBrowser.pages, inBrowser.views
}

// chartFixture is the fixture with a degraded cell that streams faster than
// the correct one, under a long name, for the performance chart.
func chartFixture() *record.Report {
	rep := fixture()
	long := cell("cutlass_with_a_much_longer_backend_name_than_usual", "cutlass")
	rep.Results = append(rep.Results, withPerf(record.Result{Cell: long, Verdict: classify.Degraded, Observations: []evidence.Observation{}}, 70000, 5))
	// The fastest cell has the longest bar, six-digit figures and the
	// "fastest" mark after them: the widest text of the chart. It is
	// recommended, with its flags.
	rep.Results[0] = withPerf(rep.Results[0], 40000, 5)
	rep.Results = append(rep.Results, withPerf(record.Result{Cell: cell("fast", "cudnn"), Verdict: classify.Correct, Observations: []evidence.Observation{}}, 102345.6, 5))
	return rep
}

// chartProbe measures the chart page as laid out (the report itself has no
// scripts) and reports, under data-chart of the wrapper page, the chart's
// size, bars and labels and the page's DOM as parsed (what --dump-dom of the
// page alone would print).
const chartProbe = `<script>
const svg = document.getElementById("perf-chart"), out = {dom: document.documentElement.outerHTML};
if (svg) {
  const r = svg.getBoundingClientRect();
  out.width = r.width; out.height = r.height;
  out.bars = [...svg.querySelectorAll("g.bar rect")].map((e) => e.getBBox().width);
  out.hatched = [...svg.querySelectorAll("g.bar rect")].filter((e) => e.getAttribute("fill") === "url(#bmx-hatch)").length;
  out.texts = [...svg.querySelectorAll("text")].map((e) => { const b = e.getBBox(); return [b.x, b.x + b.width, b.height]; });
  out.viewWidth = svg.viewBox.baseVal.width;
}
parent.document.body.setAttribute("data-chart", JSON.stringify(out));
</script>`

func layOutAll(t *testing.T, browser string) {
	dir, err := os.MkdirTemp("", "bmx-reports-browser-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h200, err := record.Load(filepath.Join("..", "..", "examples", "torch-gpu", "h200", "run"))
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{"chart": renderHTML(t, chartFixture())}
	var frames strings.Builder
	frames.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">`)
	// The wrapper declares its encoding: without it Chromium guesses from
	// the bytes, and a guess of windows-1252 garbles the srcdoc's glyphs
	// (seen once in CI). The chart page is laid out at headless Chromium's
	// default window size, as it was alone.
	frame := func(w, h int, body, probe string) {
		probed := strings.Replace(body, "</body>", probe+"</body>", 1)
		fmt.Fprintf(&frames, `<iframe style="display:block;width:%dpx;height:%dpx;border:0" srcdoc="%s"></iframe>`, w, h, html.EscapeString(probed))
	}
	frame(800, 600, pages["chart"], chartProbe)
	var views []view
	for _, page := range []struct {
		name string
		rep  *record.Report
	}{{"rich", richFixture()}, {"h200", h200}} {
		pages[page.name] = renderHTML(t, page.rep)
		for _, w := range []int{390, 1280} {
			v := view{page.name, w}
			frame(w, 900, pages[page.name], v.probe())
			views = append(views, v)
		}
	}
	frames.WriteString(`</body></html>`)
	wrapper := filepath.Join(dir, "layout.html")
	if err := os.WriteFile(wrapper, []byte(frames.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "layout.png")
	dom := string(browsertest.Run(t, browser, filepath.Join(dir, "profile"), "--dump-dom", "--screenshot="+shot, "--window-size=1400,1000", "file://"+wrapper))
	if f, err := os.Open(shot); err != nil {
		inBrowser.shotErr = err
	} else {
		inBrowser.shot, inBrowser.shotErr = png.DecodeConfig(f)
		f.Close()
	}
	inBrowser.dom, inBrowser.pages, inBrowser.views, inBrowser.ok = dom, pages, views, true
}
