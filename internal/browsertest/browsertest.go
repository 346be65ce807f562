// Package browsertest runs pages in headless Chromium for tests: it finds
// the browser (a missing one skips the test, or fails it under CI, as
// internal/testenv says), runs it, and lays pages out at given widths to
// report every element that reaches past the page's edge. It is the way
// reports/html_test.go checks the HTML report, shared so that other pages
// (bmx history, bmx publish) are checked the same way.
package browsertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// Find returns a headless Chromium, skipping the test without one, except
// under CI, where a missing browser fails it (.ci/run installs Debian's).
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Skip(t, "no Chromium installed (apt-get install chromium): the pages are not checked in a browser")
	return ""
}

// Run runs headless Chromium with args and returns its stdout; profile is
// a user-data directory of the test's own. A browser killed by a signal is
// started again, up to twice, each time with a fresh user-data directory
// (said in the test's log): Debian's Chromium was seen to die of SIGSEGV at
// start under a full test run's load, twice in a row once, and pass alone.
func Run(t testing.TB, browser, profile string, args ...string) []byte {
	t.Helper()
	out, err := run(browser, profile, args)
	for try := 1; try <= 2; try++ {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Exited() {
			break
		}
		t.Logf("%s died (%v); starting it again with a fresh profile", browser, err)
		time.Sleep(time.Second)
		out, err = run(browser, filepath.Join(profile, fmt.Sprintf("retry-%d", try)), args)
	}
	if err != nil {
		t.Fatalf("%s: %v", browser, err)
	}
	return out
}

// run runs the browser once; the error carries the end of its stderr.
func run(browser, profile string, args []string) ([]byte, error) {
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile}, args...)
	cmd := exec.Command(browser, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, &browserError{err: err, stderr: lastLines(errb.String(), 10)}
		}
	case <-time.After(3 * time.Minute):
		// A bound on a hung browser, not a timed assertion.
		cmd.Process.Kill()
		<-done
		return nil, errors.New("the browser did not finish in 3 minutes")
	}
	return out.Bytes(), nil
}

// browserError is a browser that failed, with the end of what it said.
type browserError struct {
	err    error
	stderr string
}

func (e *browserError) Error() string { return e.err.Error() + "\n" + e.stderr }
func (e *browserError) Unwrap() error { return e.err }

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// Page is one page to lay out: its name (for messages) and its file; its
// relative links and resources resolve from the file's directory.
type Page struct {
	Name string
	Path string
}

// Layout is what a page looked like at one width.
type Layout struct {
	Page  string
	Width int
	// VW is the viewport's width, SW the page's scroll width.
	VW, SW float64
	// Over are the elements that reach past the viewport's edges outside a
	// horizontal scroller (a .scroll box, which must itself fit).
	Over []string
	// Links counts the page's links; Dangling are its same-page links
	// (#id) to no element.
	Links    int
	Dangling []string
}

// Problems are what is wrong with the layout, one line each: the page
// scrolls sideways, an element leaves the page, a link goes nowhere.
func (l Layout) Problems() []string {
	var out []string
	at := fmt.Sprintf("%s at %d px", l.Page, l.Width)
	if l.VW > float64(l.Width) || l.VW < float64(l.Width)-20 {
		out = append(out, fmt.Sprintf("%s: the viewport is %.0f px", at, l.VW))
	}
	if l.SW > l.VW {
		out = append(out, fmt.Sprintf("%s: the page scrolls sideways (%.0f px wide)", at, l.SW))
	}
	for _, o := range l.Over {
		out = append(out, at+": past the edge: "+o)
	}
	for _, d := range l.Dangling {
		out = append(out, at+": a link to no element: "+d)
	}
	return out
}

// OverflowJS opens every <details>, then fills out: the viewport width
// (vw), the page's scroll width (sw), and over, each element past the
// viewport's edges outside a .scroll box; links and dangling start empty
// for the caller's own link check. The layout probes are built on it.
const OverflowJS = `for (const d of document.querySelectorAll("details")) d.open = true;
const vw = document.documentElement.clientWidth, out = {vw: vw, sw: document.documentElement.scrollWidth, over: [], links: 0, dangling: []};
for (const e of document.body.querySelectorAll("*")) {
  if (e.tagName === "SCRIPT" || e.closest("svg") && e.tagName !== "svg") continue;
  const p = e.parentElement && e.parentElement.closest(".scroll");
  if (p) continue;
  const r = e.getBoundingClientRect();
  if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5)) out.over.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "") + " " + Math.round(r.left) + ".." + Math.round(r.right) + ": " + (e.textContent || "").slice(0, 60));
}
`

const probe = `<script>
` + OverflowJS + `for (const a of document.querySelectorAll("a[href]")) { out.links++; const h = a.getAttribute("href"); if (h.startsWith("#") && !document.getElementById(decodeURIComponent(h.slice(1)))) out.dangling.push(h); }
parent.document.body.setAttribute(ATTR, JSON.stringify(out));
</script>`

// LayOut lays every page out at every width in one browser start (each an
// iframe of one wrapper page: headless Chromium's --dump-dom lays out at
// least 500 px wide, an iframe any width), every <details> open, and
// returns what each looked like.
func LayOut(t testing.TB, browser, dir string, pages []Page, widths []int) []Layout {
	t.Helper()
	var frames strings.Builder
	frames.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">`)
	type key struct {
		page  string
		width int
		attr  string
	}
	var keys []key
	for i, p := range pages {
		data, err := os.ReadFile(p.Path)
		if err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(filepath.Dir(p.Path))
		base := `<base href="file://` + html.EscapeString(abs) + `/">`
		body := strings.Replace(string(data), "<head>", "<head>"+base, 1)
		for _, w := range widths {
			k := key{p.Name, w, fmt.Sprintf("data-layout-%d-%d", i, w)}
			probed := strings.Replace(body, "</body>", strings.Replace(probe, "ATTR", strconv.Quote(k.attr), 1)+"</body>", 1)
			// The wrapper declares its encoding: without it Chromium
			// guesses from the bytes and may garble the srcdoc's glyphs.
			fmt.Fprintf(&frames, `<iframe style="display:block;width:%dpx;height:900px;border:0" srcdoc="%s"></iframe>`, w, html.EscapeString(probed))
			keys = append(keys, k)
		}
	}
	frames.WriteString(`</body></html>`)
	wrapper := filepath.Join(dir, "layout.html")
	if err := os.WriteFile(wrapper, []byte(frames.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(Run(t, browser, filepath.Join(dir, "profile"), "--dump-dom", "--window-size=1400,1000", "file://"+wrapper))
	var out []Layout
	for _, k := range keys {
		m := regexp.MustCompile(k.attr + `="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%s at %d px: the layout probe did not run", k.page, k.width)
		}
		var got struct {
			VW, SW   float64
			Over     []string
			Links    int
			Dangling []string
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
			t.Fatalf("%v: %s", err, m[1])
		}
		out = append(out, Layout{Page: k.page, Width: k.width, VW: got.VW, SW: got.SW, Over: got.Over, Links: got.Links, Dangling: got.Dangling})
	}
	return out
}
