package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolvedFromLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	first := "(EngineCore_DP0 pid=1) INFO [fp8.py:1] Using FLASHINFER_CUTLASS Fp8 MoE backend out of potential backends: ['A', 'B']\n"
	os.WriteFile(p, []byte(first+"(EngineCore_DP0 pid=1) INFO Using FLASHINFER backend.\n"), 0o644)
	got := resolvedFromLog(p, 1<<30)
	if d := cmp.Diff(map[string]string{"log:fp8_moe_backend": "FLASHINFER_CUTLASS", "log:backend": "FLASHINFER"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// What the log holds past the size given (written while the server
	// was probed) does not count.
	got = resolvedFromLog(p, int64(len(first)))
	if d := cmp.Diff(map[string]string{"log:fp8_moe_backend": "FLASHINFER_CUTLASS"}, got); d != "" {
		t.Errorf("log read to its first line: (-want +got):\n%s", d)
	}
}
