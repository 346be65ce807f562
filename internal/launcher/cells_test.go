package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// streamConfig: three axes, one with auto, an exclude, an include that
// extends cells and one that adds a cell, a reference and a known issue.
const streamConfig = `name = "keys"
reference = { moe = "cutlass", gemm = "cudnn", tp = "1" }
order = "informative"
[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "moe"
flag = "--moe"
values = ["auto", "cutlass", "trtllm", "triton"]
[[axis]]
name = "gemm"
flag = "--gemm"
values = ["cudnn", "auto", "cutlass"]
[[axis]]
name = "tp"
flag = "--tp"
values = ["1", "2"]
[[exclude]]
moe = "triton"
gemm = "cutlass"
[[include]]
tp = "2"
args = ["--two"]
[[include]]
moe = "deepep"
gemm = "cudnn"
tp = "1"
[[known]]
match = { moe = "trtllm" }
verdict = "crash"
`

func ids(cells []matrix.Cell) string {
	var out []string
	for _, c := range cells {
		out = append(out, c.ID)
	}
	return strings.Join(out, " ")
}

// TestStreamListIsPlan: the session's cells, held as keys of the matrix's
// Stream, order, resume, dedupe and shard exactly as the built plan's cells
// do through the exported functions, and build the same cells.
func TestStreamListIsPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.toml")
	if err := os.WriteFile(path, []byte(streamConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, stream, err := loadStream(path, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	plan := stream.Plan()
	list := cellList{src: stream, keys: stream.Keys()}
	if got, want := ids(list.built()), ids(plan.Cells); got != want {
		t.Fatalf("built:\n got %s\nwant %s", got, want)
	}
	done := []record.Result{{Cell: plan.Cells[3], Verdict: classify.Crash}}
	baseline := &record.Report{Results: []record.Result{{Cell: plan.Cells[5], Verdict: classify.Correct}, {Cell: plan.Cells[6], Verdict: classify.Crash}}}
	blamed := []matrix.AxisValue{{Axis: "gemm", Value: "cutlass"}}
	for _, order := range matrix.Orders {
		cfg.Order = order
		want := AutoFirst(OrderCells(cfg, plan.Cells, plan.Reference, done, baseline, blamed), plan.Reference)
		got := autoFirst(orderList(cfg, list, stream.Reference, done, baseline, blamed), stream.Reference).built()
		if ids(got) != ids(want) {
			t.Errorf("order %s:\n got %s\nwant %s", order, ids(got), ids(want))
		}
		for i := range got {
			if !slices.Equal(got[i].Args, want[i].Args) {
				t.Errorf("order %s: cell %s args %q, want %q", order, got[i].ID, got[i].Args, want[i].Args)
			}
		}
	}
	// Twins: an auto cell that resolved finds the same twin among the
	// list as among the built cells.
	auto := plan.Cells[slices.IndexFunc(plan.Cells, func(c matrix.Cell) bool { return c.ID == "moe=auto,gemm=cudnn,tp=2" })]
	resolved := map[string]string{"moe": "cutlass"}
	want, okWant := cfg.Twin(auto, resolved, plan.Cells)
	got, okGot := cfg.TwinAmong(auto, resolved, list.lookup)
	if okGot != okWant || got.ID != want.ID || !okWant {
		t.Errorf("twin %s %v, want %s %v", got.ID, okGot, want.ID, okWant)
	}
	for _, sh := range []matrix.Shard{{Index: 0, Count: 3}, {Index: 2, Count: 3}} {
		p := *plan
		a := p.KeepShard(sh)
		kept, ga := keepShard(list, stream.Reference, sh)
		if ids(kept.built()) != ids(p.Cells) || fmt.Sprint(ga) != fmt.Sprint(a) {
			t.Errorf("shard %s:\n got %s\nwant %s", sh, ids(kept.built()), ids(p.Cells))
		}
	}
}

// TestPreflightPlaceholdersInCells: preflight checks one cell for all only
// when no cell can differ; a placeholder that an axis value, its env, or a
// cell an include adds brings is still found in that cell.
func TestPreflightPlaceholdersInCells(t *testing.T) {
	head := "[server]\ncommand = [\"/no/such/server\", \"--port\", \"{port}\"]\n[[axis]]\nname = \"a\"\nflag = \"--a\"\n"
	for name, tc := range map[string]struct{ toml, want string }{
		"value":   {`values = ["x", "{nope}"]`, "cell a={nope}: {nope} cannot be filled in"},
		"env":     {"values = [\"x\", { name = \"y\", env = { E = \"{gpus}\" } }]", "cell a=y: {gpus} cannot be filled in"},
		"include": {"values = [\"x\"]\n[[include]]\na = \"{inc}\"", "cell a={inc}: {inc} cannot be filled in"},
		"clean":   {`values = ["x", "y", "z"]`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := matrix.Parse("p.toml", []byte(head+tc.toml+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := cfg.Expand()
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, e := range Preflight(cfg, plan.Cells, nil, "/bin/bmx", t.TempDir()) {
				msgs = append(msgs, e.Error())
			}
			// The executable is looked up once whatever the path.
			exe := 0
			for _, m := range msgs {
				if strings.Contains(m, `server executable "/no/such/server"`) {
					exe++
				}
			}
			if exe != 1 || tc.want != "" && !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, tc.want) }) {
				t.Errorf("errors:\n%s\nwant one about the executable and %q", strings.Join(msgs, "\n"), tc.want)
			}
		})
	}
}
