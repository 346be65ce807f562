package server

import "testing"

func TestParseGPUMemory(t *testing.T) {
	got, err := ParseGPUMemory([]byte("0, 143000\n1, 3\n"))
	if err != nil || len(got) != 2 || got[0].UsedMiB != 143000 || got[1].Index != 1 {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"0, 1, 2\n", "GPU0, 5\n"} {
		if _, err := ParseGPUMemory([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
