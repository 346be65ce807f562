package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEProfile decodes the profile docs/config.md documents the format
// with, and checks it does what the docs say of it, so the
// documentation cannot drift from the decoder.
func TestREADMEProfile(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	const start = "```toml\n# myhost.toml\n"
	i := strings.Index(string(readme), start)
	if i < 0 {
		t.Fatal("docs/config.md has no profile example (a ```toml block starting # myhost.toml)")
	}
	text := string(readme[i+len("```toml\n"):])
	text = text[:strings.Index(text, "```")]
	p, err := ParseProfile("docs/config.md", []byte(text))
	if err != nil {
		t.Fatalf("the profile of docs/config.md does not decode: %v", err)
	}
	if p.Startup.Duration != 2*time.Second || p.Speed.Token.Duration != 5*time.Millisecond || len(p.Rules) != 3 {
		t.Errorf("profile %+v", p)
	}
	resolved := p.Resolve(Options{MoERunner: "auto", FP4Gemm: "auto", TP: 1})
	if resolved["moe_runner_backend"] != "flashinfer_cutlass" || p.Rule(resolved).Behaviour != Correct {
		t.Errorf("auto resolves to %v and behaves %q; docs/config.md says the cutlass x cudnn default is correct", resolved, p.Rule(resolved).Behaviour)
	}
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{MoERunner: "flashinfer_trtllm", FP4Gemm: "auto", TP: 1}, Crash},
		{Options{MoERunner: "flashinfer_cutlass", FP4Gemm: "flashinfer_cutlass", TP: 1}, NaNBatch},
		{Options{MoERunner: "auto", FP4Gemm: "auto", Attention: "fa4", TP: 8}, Hang},
		{Options{MoERunner: "auto", FP4Gemm: "auto", Attention: "fa4", TP: 4}, Correct},
	} {
		if got := p.Rule(p.Resolve(tt.o)).Behaviour; got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.o, got, tt.want)
		}
	}
	// The list of behaviours in docs/config.md is the decoder's.
	for _, b := range behaviours {
		if !strings.Contains(string(readme), "`"+b+"`") {
			t.Errorf("docs/config.md does not document the behaviour %s", b)
		}
	}
}
