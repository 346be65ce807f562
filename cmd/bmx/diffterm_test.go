package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// TestDiffConfig runs bmx diff, in-process, on the recorded runs of two
// configs of the simulated host (internal/reports records them from real
// sweeps, testdata/diffconfig) that differ in an axis value each way, a
// server flag, the server's environment (a secret among it), a var, an
// exclude, the reference cell and a known issue, and checks that it names
// each change, and nothing else, in every format, without printing a
// secret. internal/reports' TestDiffConfig checks the same of Compare and
// its renderers.
func TestDiffConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const (
		oldToken = "hf_AAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		newToken = "hf_BBBBBBBBBBBBBBBBBBBBBBBBBBBB"
		apiKey   = "sk-CCCCCCCCCCCCCCCCCCCCCCCC"
	)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "internal", "reports", "testdata", "diffconfig"))); err != nil {
		t.Fatal(err)
	}
	base, next := filepath.Join(dir, "base"), filepath.Join(dir, "next")

	want := []string{
		"config: axis moe_runner: - flashinfer_trtllm",
		"config: axis fp4_gemm: + flashinfer_cutedsl",
		"config: server.command: - --watchdog-timeout 30",
		"config: server.command: + --watchdog-timeout 60",
		"config: server.env: + API_KEY=<redacted>",
		"config: server.env: KEEP=1 -> KEEP=2",
		"config: exclude: + fp4_gemm=flashinfer_cutedsl,moe_runner=flashinfer_cutlass",
		"config: reference: fp4_gemm=flashinfer_cudnn,moe_runner=flashinfer_cutlass -> fp4_gemm=flashinfer_cutlass,moe_runner=flashinfer_cutlass",
		"config: vars: tp=8 -> tp=4",
		"config: known: - moe_runner=flashinfer_trtllm: crash",
	}
	unescape := strings.NewReplacer(`\_`, "_", "&gt;", ">", "&lt;", "<")
	configLines := func(out, prefix string) []string {
		var got []string
		for _, l := range strings.Split(unescape.Replace(out), "\n") {
			if l, ok := strings.CutPrefix(l, prefix); ok && strings.HasPrefix(l, "config: ") {
				got = append(got, l)
			}
		}
		return got
	}
	outs := map[string]string{}
	for _, format := range []string{"table", "md", "json"} {
		code, stdout, stderr := bmx(t, "diff", base, next, "--format", format)
		if code != ExitOK && code != ExitFailed {
			t.Fatalf("diff --format %s: exit %d\n%s", format, code, stderr)
		}
		outs[format] = stdout
		for _, secret := range []string{oldToken, newToken, apiKey} {
			if strings.Contains(stdout, secret) {
				t.Errorf("diff --format %s prints a secret", format)
			}
		}
	}
	if diff := cmp.Diff(want, configLines(outs["table"], "")); diff != "" {
		t.Errorf("table: config lines (-want +got):\n%s\n%s", diff, outs["table"])
	}
	if diff := cmp.Diff(want, configLines(outs["md"], "- ")); diff != "" {
		t.Errorf("md: config lines (-want +got):\n%s\n%s", diff, outs["md"])
	}
	var d reports.Diff
	if err := json.Unmarshal([]byte(outs["json"]), &d); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Config {
		got = append(got, c.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("json: config changes (-want +got):\n%s", diff)
	}
	if len(d.ConfigNotes) != 0 {
		t.Errorf("notes: %q", d.ConfigNotes)
	}

	// A run against itself: nothing changed, and it says so.
	for format, prefix := range map[string]string{"table": "", "md": "- "} {
		_, stdout, _ := bmx(t, "diff", base, base, "--format", format)
		if got := configLines(stdout, prefix); !cmp.Equal(got, []string{"config: unchanged"}) {
			t.Errorf("%s: same run: %q\n%s", format, got, stdout)
		}
	}
	_, stdout, _ := bmx(t, "diff", base, base, "--format", "json")
	if !strings.Contains(stdout, `"config": []`) {
		t.Errorf("json: same run:\n%s", stdout)
	}
}

// checkTableFits checks the table a sweep printed at its end, written to a
// pipe (stdout), fits 100 columns, and the same report rendered again at 60
// and 160 fits those, a row per cell with its verdict.
func checkTableFits(t *testing.T, stdout string, rep *record.Report) {
	t.Helper()
	renders := map[int]string{reports.DefaultWidth: stdout}
	for _, w := range []int{60, 160} {
		var b bytes.Buffer
		if err := reports.TableWith(&b, rep, reports.TableOptions{Width: w}); err != nil {
			t.Fatal(err)
		}
		renders[w] = b.String()
	}
	for w, text := range renders {
		rows := 0
		inDetail := false
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "| ") && strings.Contains(l, "| verdict ") && (strings.Contains(l, "| reason ") || strings.Contains(l, "| why ")) {
				inDetail = true
			}
			if inDetail && !strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "+") {
				break
			}
			if !inDetail {
				continue
			}
			if n := twwidth.Width(l); n > w {
				t.Errorf("width %d: a line of %d: %s", w, n, l)
			}
			if strings.HasPrefix(l, "| ") && !strings.Contains(l, "| verdict ") {
				if v := strings.TrimSpace(strings.Split(l, "|")[2]); v != rep.Results[rows].Shown() {
					t.Errorf("width %d: row %d verdict %q, want %q", w, rows, v, rep.Results[rows].Shown())
				}
				rows++
			}
		}
		if rows != len(rep.Results) {
			t.Errorf("width %d: %d rows for %d cells:\n%s", w, rows, len(rep.Results), text)
		}
	}
}
