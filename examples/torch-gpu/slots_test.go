package torchgpu

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// TestPipelinePlan checks pipeline.py's placement in plain Python (no torch):
// which devices --device and --split give, and which layers go on each, as
// the server logs it; and the splits it refuses.
func TestPipelinePlan(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(python()); err != nil {
		testenv.Skip(t, "the placement test needs %s: it is not installed", python())
	}
	tests := []struct {
		layers, split int
		device        string
		devices       []string
		stage         []int
		placement     string
	}{
		{5, 1, "cuda", []string{"cuda"}, []int{0, 0, 0, 0, 0}, "layers 0-4 on cuda"},
		{5, 2, "cuda", []string{"cuda:0", "cuda:1"}, []int{0, 0, 0, 1, 1}, "layers 0-2 on cuda:0, layers 3-4 on cuda:1"},
		{5, 2, "cpu", []string{"cpu", "cpu"}, []int{0, 0, 0, 1, 1}, "layers 0-2 on cpu, layers 3-4 on cpu"},
		{4, 1, "cuda:1,cuda:0", []string{"cuda:1", "cuda:0"}, []int{0, 0, 1, 1}, "layers 0-1 on cuda:1, layers 2-3 on cuda:0"},
		{5, 4, "cuda", []string{"cuda:0", "cuda:1", "cuda:2", "cuda:3"}, []int{0, 0, 1, 2, 3}, "layers 0-1 on cuda:0, layer 2 on cuda:1, layer 3 on cuda:2, layer 4 on cuda:3"},
	}
	for _, tt := range tests {
		out := run(t, python(), stdlib("pipeline.py", "plan", strconv.Itoa(tt.layers), tt.device, strconv.Itoa(tt.split))...)
		var got struct {
			Devices   []string `json:"devices"`
			Stage     []int    `json:"stage"`
			Placement string   `json:"placement"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !slices.Equal(got.Devices, tt.devices) || !slices.Equal(got.Stage, tt.stage) || got.Placement != tt.placement {
			t.Errorf("%d layers, --device %s --split %d: %+v, want %v %v %q", tt.layers, tt.device, tt.split, got, tt.devices, tt.stage, tt.placement)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"2", "cuda", "3"}, "2 decoder layers cannot be split over 3 devices"},
		{[]string{"5", "cuda:1", "2"}, "--split 2 needs --device cuda or cpu"},
		{[]string{"5", "cuda:0,cuda:1", "3"}, "--split 3 with the 2 devices of --device cuda:0,cuda:1"},
		{[]string{"5", "cuda", "0"}, "--split 0: want 1 or more"},
	} {
		out, err := exec.Command(python(), stdlib(append([]string{"pipeline.py", "plan"}, bad.args...)...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), bad.want) {
			t.Errorf("plan %v: %v, want a failure saying %q:\n%s", bad.args, err, bad.want, out)
		}
	}
}

// TestMatrixSlots checks the slot matrix: 12 cells (3 per slot on four
// GPUs), the reference first, the [[slot]] layout of a 4-GPU host (two
// one-GPU slots and one of two), --split {ngpus} so a cell on the two-GPU
// slot splits over both, and the leaking and out-of-memory cells, one each.
func TestMatrixSlots(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("slots.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "moe=naive,dtype=float32"
	if len(plan.Cells) != 12 || plan.Reference != ref || plan.Cells[0].ID != ref {
		t.Fatalf("%d cells, reference %q first %q", len(plan.Cells), plan.Reference, plan.Cells[0].ID)
	}
	var slots []string
	for _, s := range cfg.Slots {
		slots = append(slots, s.GPUs)
	}
	if !slices.Equal(slots, []string{"0", "1", "2,3"}) {
		t.Errorf("slots %q", slots)
	}
	for gpus, split := range map[string]string{"0": "1", "2,3": "2"} {
		argv, env := cfg.Command(plan.Cells[0], matrix.Runtime{Self: "bmx", Port: 30000, GPUs: gpus})
		if i := slices.Index(argv, "--split"); i < 0 || argv[i+1] != split {
			t.Errorf("on slot %s: argv %q, want --split %s", gpus, argv, split)
		}
		if !slices.Contains(env, "CUDA_DEVICE_ORDER=PCI_BUS_ID") {
			t.Errorf("env %q: CUDA must number GPUs as nvidia-smi does", env)
		}
	}
	roles := map[string]string{}
	for _, c := range plan.Cells {
		args := strings.Join(c.Args, " ")
		if strings.Contains(args, "--detached-worker") {
			roles["leak"] += c.ID
		}
		if strings.Contains(args, "--reserve-gib 200") {
			roles["oom"] += c.ID
		}
	}
	if roles["leak"] != "moe=naive,dtype=float16" || roles["oom"] != "moe=grouped_mm,dtype=float16" {
		t.Errorf("leaking and out-of-memory cells %v", roles)
	}
	if !strings.HasSuffix(cfg.Probes.File, "probes-slots.toml") {
		t.Errorf("probes %q, want probes-slots.toml (no performance probe)", cfg.Probes.File)
	}
}

// TestServerCPUSplit serves the model with its decoder layers split over
// two devices (cpu twice: the same placement, hooks and moves a two-GPU
// slot's server makes, without a GPU), dense and MoE, and checks the greedy
// answer against the plain-Python references as TestServerCPU does: a
// split that lost a layer, skipped a hook or kept an input on the wrong
// device would not give the same tokens and logprobs.
func TestServerCPUSplit(t *testing.T) {
	model := needModel(t)
	needTorch(t)
	bad, err := exec.Command(python(), "server.py", "--model", model, "--device", "cuda:1", "--split", "2").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(bad), "--split 2 needs --device cuda or cpu") {
		t.Errorf("a split of one named GPU: %v\n%s", err, bad)
	}
	const n, prompt = 8, "Once upon a time"
	for _, c := range []struct {
		name string
		args []string
		ref  func() generated
	}{
		{"dense", nil, func() generated { return reference(t, convert(t, model), prompt, n) }},
		{"moe", []string{"--moe-runner", "naive", "--moe-pad", "16"}, func() generated { return referenceMoE(t, convertMoE(t, model), prompt, n, "on") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--device", "cpu", "--split", "2", "--attention-backend", "math", "--dtype", "float32"}, c.args...)
			url, log := startServerLog(t, model, args...)
			if !strings.Contains(log.String(), "pipeline over 2 devices: layers 0-2 on cpu, layers 3-4 on cpu") {
				t.Errorf("the server does not say it split its layers:\n%s", log)
			}
			answer, worst := greedyAsReference(t, url, prompt, n, c.ref())
			t.Logf("split over cpu,cpu: %q, top-5 logprobs within %.2g nats of the plain-Python reference", answer, worst)
			if worst > 1e-3 {
				t.Errorf("the split server's logprobs differ from the reference's by %.3g nats", worst)
			}
		})
	}
}
