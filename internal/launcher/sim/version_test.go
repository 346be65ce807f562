package sim

import (
	"strings"
	"testing"
)

// TestVersions checks that the built-in profile's versioned rules change
// the two cells at their versions, and leave version 1 as it was.
func TestVersions(t *testing.T) {
	p := DefaultProfile()
	tests := []struct {
		moe, fp4  string
		version   int
		behaviour string
		slow      bool
	}{
		{"flashinfer_cutlass", "flashinfer_cudnn", 0, Correct, false},
		{"flashinfer_cutlass", "flashinfer_cudnn", 5, Correct, false},
		{"flashinfer_cutlass", "flashinfer_cudnn", 6, Crash, false},
		{"flashinfer_cutlass", "flashinfer_cudnn", 129, Crash, false},
		{"flashinfer_cutedsl", "flashinfer_cutedsl", 4, Drift, false},
		{"flashinfer_cutedsl", "flashinfer_cutedsl", 5, Drift, true},
		{"flashinfer_trtllm", "flashinfer_cudnn", 9, Crash, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join([]string{tt.moe, tt.fp4, string(rune('0' + tt.version%10))}, "/"), func(t *testing.T) {
			rule := p.Rule(p.Resolve(Options{MoERunner: tt.moe, FP4Gemm: tt.fp4, TP: 8, Version: tt.version}))
			if rule.Behaviour != tt.behaviour {
				t.Errorf("version %d: behaviour %q, want %q", tt.version, rule.Behaviour, tt.behaviour)
			}
			if slow := p.SpeedOf(rule).Token.Duration > 2*p.Speed.Token.Duration; slow != tt.slow {
				t.Errorf("version %d: slow %v, want %v (token latency %v)", tt.version, slow, tt.slow, p.SpeedOf(rule).Token)
			}
		})
	}
}

func TestVersionFlags(t *testing.T) {
	o, err := ParseArgs([]string{"--print-versions", "--sim-version", "7"})
	if err != nil || !o.PrintVersions || o.Version != 7 {
		t.Fatalf("ParseArgs = %+v, %v", o, err)
	}
	if _, err := ParseArgs([]string{"--model-path", "m", "--sim-version", "-1"}); err == nil || !strings.Contains(err.Error(), "--sim-version") {
		t.Errorf("--sim-version -1: error %v, want one naming the flag", err)
	}
	if got := Versions(7); !strings.Contains(got, "sglang=0.5.7.dev0+sim\n") {
		t.Errorf("Versions(7) = %q", got)
	}
	_, err = ParseProfile("p.toml", []byte("[[rule]]\nwhen = {}\nbehaviour = \"crash\"\nsince = 5\nbefore = 3\n"))
	if err == nil || !strings.Contains(err.Error(), "since 5, before 3") {
		t.Errorf("since 5 before 3: error %v", err)
	}
}
