package launcher

import (
	"errors"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestSameStart: the first cells all crashed the same way before their
// servers were ready, across two values of every axis, is a broken setup;
// a failure one axis value could explain (every cell has it, or the
// signature names it), a cell that got ready, another signature, or too few
// cells are not.
func TestSameStart(t *testing.T) {
	crash := func(sig string, vals ...string) record.Result {
		var c matrix.Cell
		var ids []string
		for i, v := range vals {
			axis := []string{"moe", "fp4"}[i]
			c.Values = append(c.Values, matrix.AxisValue{Axis: axis, Value: v})
			ids = append(ids, axis+"="+v)
		}
		c.ID = strings.Join(ids, ",")
		return record.Result{Cell: c, Verdict: classify.Crash, Signature: sig, LogPath: "logs/" + c.ID + ".log"}
	}
	const sig = "RuntimeError: CUDA driver version is insufficient for CUDA runtime version"
	ready := crash(sig, "cutlass", "cudnn")
	ready.Timings.ReadyMS = 900
	tests := []struct {
		name    string
		results []record.Result
		stop    bool
	}{
		{"every axis, two values", []record.Result{crash(sig, "cutlass", "cudnn"), crash(sig, "cutlass", "trtllm"), crash(sig, "triton", "cudnn")}, true},
		{"too few", []record.Result{crash(sig, "cutlass", "cudnn"), crash(sig, "triton", "trtllm")}, false},
		{"one moe value", []record.Result{crash(sig, "cutlass", "cudnn"), crash(sig, "cutlass", "trtllm"), crash(sig, "cutlass", "marlin")}, false},
		{"another signature", []record.Result{crash(sig, "cutlass", "cudnn"), crash(sig, "cutlass", "trtllm"), crash("Segmentation fault", "triton", "cudnn")}, false},
		{"signature names a value", []record.Result{crash("no kernel for cudnn", "cutlass", "cudnn"), crash("no kernel for cudnn", "cutlass", "trtllm"), crash("no kernel for cudnn", "triton", "cudnn")}, false},
		{"an exit status only", []record.Result{crash("exit code 1", "cutlass", "cudnn"), crash("exit code 1", "cutlass", "trtllm"), crash("exit code 1", "triton", "cudnn")}, false},
		{"ready", []record.Result{crash(sig, "cutlass", "trtllm"), crash(sig, "triton", "cudnn"), ready}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sameStart(tt.results)
			var se *SetupError
			if errors.As(err, &se) != tt.stop {
				t.Fatalf("got %v, want a SetupError: %v", err, tt.stop)
			}
			if !tt.stop {
				return
			}
			want := "stopped after the first 3 cells (moe=cutlass,fp4=cudnn): the setup is broken, not a backend: " + SetupSame + ": " + sig + " (see logs/moe=cutlass,fp4=cudnn.log); fix it or pass --keep-going"
			if err.Error() != want {
				t.Errorf("got  %s\nwant %s", err, want)
			}
		})
	}
}
