package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolvedFromLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	os.WriteFile(p, []byte("(EngineCore_DP0 pid=1) INFO [fp8.py:1] Using FLASHINFER_CUTLASS Fp8 MoE backend out of potential backends: ['A', 'B']\n(EngineCore_DP0 pid=1) INFO Using FLASHINFER backend.\n"), 0o644)
	got := resolvedFromLog(p)
	if d := cmp.Diff(map[string]string{"log:fp8_moe_backend": "FLASHINFER_CUTLASS", "log:backend": "FLASHINFER"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
