package matrix

import (
	"testing"
)

const dedupeSrc = `[server]
command = ["srv", "--port", "{port}"]
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["auto", "flashinfer_cutlass", "triton", {name = "deep_gemm", args = ["--jit"]}]
[[axis]]
name = "attn"
env = "ATTN"
values = ["auto", "fa3"]
`

func cellByID(t *testing.T, cells []Cell, id string) Cell {
	t.Helper()
	for _, c := range cells {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no cell %s", id)
	return Cell{}
}

// TestTwin: an auto cell's twin is the cell of the values auto resolved to,
// found through the flag's dest, the env name or a log key; none when an
// auto did not resolve, or the explicit value brings args of its own.
func TestTwin(t *testing.T) {
	cfg, err := Parse("d.toml", []byte(dedupeSrc), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cell     string
		resolved map[string]string
		want     string
	}{
		{"moe_runner=auto,attn=fa3", map[string]string{"moe_runner_backend": "flashinfer_cutlass", "attention_backend": "flashinfer"}, "moe_runner=flashinfer_cutlass,attn=fa3"},
		{"moe_runner=auto,attn=auto", map[string]string{"moe_runner_backend": "triton", "log:attn_backend": "fa3"}, "moe_runner=triton,attn=fa3"},
		{"moe_runner=auto,attn=auto", map[string]string{"moe_runner_backend": "triton"}, ""},                                           // attn did not say
		{"moe_runner=auto,attn=fa3", map[string]string{"moe_runner_backend": "auto"}, ""},                                              // still auto
		{"moe_runner=auto,attn=fa3", map[string]string{"moe_runner_backend": "deep_gemm"}, ""},                                         // deep_gemm adds --jit
		{"moe_runner=auto,attn=fa3", map[string]string{"moe_runner_backend": "marlin"}, ""},                                            // no such cell
		{"moe_runner=triton,attn=fa3", map[string]string{"moe_runner_backend": "flashinfer_cutlass"}, ""},                              // not auto
		{"moe_runner=auto,attn=fa3", map[string]string{"moe_runner": "triton", "attn_backend": "other"}, "moe_runner=triton,attn=fa3"}, // the axis name
	} {
		twin, ok := cfg.Twin(cellByID(t, plan.Cells, tc.cell), tc.resolved, plan.Cells)
		if got := map[bool]string{true: twin.ID}[ok]; got != tc.want {
			t.Errorf("Twin(%s, %v) = %q, want %q", tc.cell, tc.resolved, got, tc.want)
		}
	}
}

// TestKnownMatchesResolved: a known issue of a backend matches an auto cell
// that resolved to it, and still matches what it matched before.
func TestKnownMatchesResolved(t *testing.T) {
	k := Known{Match: map[string]string{"moe_runner": "flashinfer_cutlass"}}
	auto := Cell{ID: "moe_runner=auto,attn=fa3", Values: []AxisValue{{"moe_runner", "auto"}, {"attn", "fa3"}}}
	if k.Matches(auto) {
		t.Error("matched an auto cell whose resolution is unknown")
	}
	auto.Resolved = map[string]string{"moe_runner": "flashinfer_cutlass"}
	if !k.Matches(auto) {
		t.Error("did not match an auto cell that resolved to the known issue's backend")
	}
	if !(Known{Match: map[string]string{"moe_runner": "auto"}}).Matches(auto) {
		t.Error("a known issue of auto itself no longer matches")
	}
	auto.Resolved = map[string]string{"moe_runner": "triton"}
	if k.Matches(auto) {
		t.Error("matched an auto cell that resolved to another backend")
	}
}
