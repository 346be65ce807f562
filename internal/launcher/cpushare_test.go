package launcher

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// TestCPUShare: the warning comes when the slots' servers, each with the
// threads its command gives it, are more than the CPUs; one slot, or CPUs
// to spare, warn of nothing.
func TestCPUShare(t *testing.T) {
	cfg := func(command string) *matrix.Config {
		t.Helper()
		c, err := matrix.Parse("m.toml", []byte(`[server]
command = `+command+`
[[axis]]
name = "a"
flag = "--a"
values = ["x", "y"]
`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	plain := cfg(`["srv", "--port", "{port}"]`)
	threads := cfg(`["llama-server", "--port", "{port}", "-t", "4"]`)
	tests := []struct {
		name       string
		cfg        *matrix.Config
		slots, cpu int
		want       string
	}{
		{"one slot", threads, 1, 2, ""},
		{"CPUs to spare", plain, 2, 2, ""},
		{"more slots than CPUs", plain, 4, 2, "4 slots run servers of 1 thread(s) each at once on 2 CPUs: they share the CPUs"},
		{"threads", threads, 2, 4, "2 slots run servers of 4 thread(s) each at once on 4 CPUs: they share the CPUs, so cells running at the same time slow each other (speed figures, timeouts); measure speed with --slots 1"},
		{"threads fit", threads, 2, 8, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CPUShare(tt.cfg, tt.slots, "bmx", tt.cpu)
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want %q...", got, tt.want)
			}
		})
	}
}
