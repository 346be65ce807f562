// Package archtest guards the package table of docs/architecture.md: what
// its "never" column says about imports is checked here against what
// `go list` says each package depends on, so a change that breaks a rule
// fails the tests instead of waiting for a reader to notice.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// module begins the import path of every package of bmx's.
const module = "github.com/bmx-dev/bmx/"

// pkg is what `go list` says of a package: what it imports itself and
// everything it depends on, each by import path (bmx's relative to the
// module, as the table names them: "internal/record").
type pkg struct {
	Imports []string // its own imports by full path, the standard library's included
	Deps    []string // bmx's packages it depends on, directly or not, relative
}

// graph is every package of the module, by path relative to the module.
type graph map[string]pkg

// listPackages runs `go list` on the module's packages (tests left out:
// they may import what the code may not).
func listPackages(t *testing.T) graph {
	t.Helper()
	root := testenv.Root()
	if root == "" {
		t.Fatal("no repository root above the working directory")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Skip(t, "the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-json=ImportPath,Imports,Deps,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath    string
			Imports, Deps []string
			Error         *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		var own pkg
		for _, d := range p.Deps {
			if r, ok := strings.CutPrefix(d, module); ok {
				own.Deps = append(own.Deps, r)
			}
		}
		own.Imports = p.Imports
		g[rel] = own
	}
	return g
}

// under reports a package at or under the tree root ("internal/launcher"
// holds internal/launcher/server).
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// rule is one line of the table's "never" column that is about imports.
type rule struct {
	// pkg is the package the rule binds; with tree, every package under
	// it too.
	pkg  string
	tree bool
	// notDeps are the bmx packages (each with the tree under it) it must
	// not depend on, directly or not.
	notDeps []string
	// onlyDeps, when set, are the only bmx packages it may depend on.
	onlyDeps []string
	// notImports are standard packages it must not import itself.
	notImports []string
	// never is the table's words the rule checks.
	never string
}

// rules are the import rules of docs/architecture.md's package table.
var rules = []rule{
	{pkg: "internal/evidence", onlyDeps: []string{}, notImports: []string{"os", "os/exec", "io/fs", "net", "net/http", "syscall"},
		never: "imports anything of bmx, does I/O"},
	{pkg: "internal/matrix", notImports: []string{"os/exec"}, never: "starts processes"},
	{pkg: "internal/record", notDeps: []string{"internal/launcher", "internal/reports"}, never: "imports launcher or reports"},
	// The launcher's row, slurm's ("imports reports") and bisect's (the
	// perf gate's rule comes from reports through a callback): nothing
	// that runs servers depends on what renders them.
	{pkg: "internal/launcher", tree: true, notDeps: []string{"internal/reports"}, never: "imports reports"},
	{pkg: "internal/launcher/server", onlyDeps: []string{"internal/matrix", "internal/evidence"},
		never: "imports more of bmx than matrix and evidence"},
	// Verdicts are classify's: the probe client gathers evidence only.
	{pkg: "internal/launcher/probe", notDeps: []string{"internal/classify"}, never: "decides verdicts"},
	{pkg: "internal/classify", notDeps: []string{"internal/launcher/probe", "internal/record"},
		never: "imports the probe client or record"},
	{pkg: "internal/reports", notDeps: []string{"internal/launcher"}, never: "imports launcher"},
	{pkg: "internal/reports/across", notDeps: []string{"internal/launcher"}, notImports: []string{"os/exec"},
		never: "runs anything (so imports no launcher and starts no process)"},
}

// testHelper reports a package that only tests may use: testenv,
// browsertest, matrixtest and any other helper named "...test".
func testHelper(p string) bool {
	return strings.HasPrefix(p, "internal/") && (p == "internal/testenv" || strings.HasSuffix(path.Base(p), "test"))
}

// simImporters are the packages that may import the simulated server:
// the command, and the launcher's check of a matrix's sim profile
// (SimProfileErrors reads it as the server will).
var simImporters = []string{"cmd/bmx", "internal/launcher"}

// violations are the rules g breaks, one line each.
func violations(g graph) []string {
	var out []string
	for _, r := range rules {
		bound := 0
		for _, p := range slices.Sorted(maps.Keys(g)) {
			if p != r.pkg && !(r.tree && under(p, r.pkg)) {
				continue
			}
			bound++
			deps := g[p].Deps
			for _, d := range deps {
				for _, n := range r.notDeps {
					if under(d, n) {
						out = append(out, fmt.Sprintf("%s depends on %s (never: %s)", p, d, r.never))
					}
				}
				if r.onlyDeps != nil && !slices.Contains(r.onlyDeps, d) {
					out = append(out, fmt.Sprintf("%s depends on %s, not only on %v (never: %s)", p, d, r.onlyDeps, r.never))
				}
			}
			for _, i := range g[p].Imports {
				if slices.Contains(r.notImports, i) {
					out = append(out, fmt.Sprintf("%s imports %s (never: %s)", p, i, r.never))
				}
			}
		}
		if bound == 0 {
			out = append(out, fmt.Sprintf("no package %s: the rule %q binds nothing (moved? update docs/architecture.md and this test)", r.pkg, r.never))
		}
	}
	// The command and everything it is built from is bmx's code: no
	// test helper among it.
	cmd, ok := g["cmd/bmx"]
	if !ok {
		out = append(out, "no package cmd/bmx")
	}
	for _, d := range cmd.Deps {
		if testHelper(d) {
			out = append(out, fmt.Sprintf("cmd/bmx depends on %s (never: is used by non-test code)", d))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(g)) {
		if !slices.Contains(simImporters, p) && slices.Contains(g[p].Imports, module+"internal/launcher/sim") {
			out = append(out, fmt.Sprintf("%s imports internal/launcher/sim (never: is imported by anything but cmd, tests and the launcher's profile check)", p))
		}
	}
	return out
}

// TestPackageTable checks the module's packages against the table's rules.
func TestPackageTable(t *testing.T) {
	g := listPackages(t)
	for _, v := range violations(g) {
		t.Error(v)
	}
}

// TestPackageTableCatches breaks each rule in the module's real graph, one
// edge at a time, and wants the guard to say so: a rule the guard cannot
// see broken guards nothing.
func TestPackageTableCatches(t *testing.T) {
	g := listPackages(t)
	breaks := []struct{ pkg, dep, imp string }{
		{pkg: "internal/evidence", dep: "internal/matrix"},
		{pkg: "internal/evidence", imp: "os"},
		{pkg: "internal/matrix", imp: "os/exec"},
		{pkg: "internal/record", dep: "internal/reports"},
		{pkg: "internal/record", dep: "internal/launcher/server"},
		{pkg: "internal/launcher/slurm", dep: "internal/reports"},
		{pkg: "internal/launcher/bisect", dep: "internal/reports"},
		{pkg: "internal/launcher/server", dep: "internal/classify"},
		{pkg: "internal/launcher/probe", dep: "internal/classify"},
		{pkg: "internal/classify", dep: "internal/record"},
		{pkg: "internal/classify", dep: "internal/launcher/probe"},
		{pkg: "internal/reports", dep: "internal/launcher"},
		{pkg: "internal/reports/across", dep: "internal/launcher/bisect"},
		{pkg: "internal/reports/across", imp: "os/exec"},
		{pkg: "cmd/bmx", dep: "internal/matrixtest"},
		{pkg: "internal/record", imp: module + "internal/launcher/sim"},
	}
	for _, b := range breaks {
		broken := graph{}
		for k, v := range g {
			broken[k] = pkg{Imports: slices.Clone(v.Imports), Deps: slices.Clone(v.Deps)}
		}
		p := broken[b.pkg]
		if b.dep != "" {
			p.Deps = append(p.Deps, b.dep)
		}
		if b.imp != "" {
			p.Imports = append(p.Imports, b.imp)
		}
		broken[b.pkg] = p
		if got := len(violations(broken)) - len(violations(g)); got < 1 {
			t.Errorf("%s made to depend on %s%s: the guard finds nothing", b.pkg, b.dep, b.imp)
		}
	}
}
