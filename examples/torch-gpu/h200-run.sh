#!/bin/bash
# The live run on an H200, from the repository root, with a cross-compiled
# bmx, the cross-compiled test binary and the model in .bmx-device/:
#   GOOS=linux GOARCH=amd64 go build -o .bmx-device/bmx ./cmd/bmx
#   GOOS=linux GOARCH=amd64 go test -c -o .bmx-device/torchgpu.test ./examples/torch-gpu
#   cp ../shared/models/stories260K.gguf .bmx-device/
# 1. the CPU test (conversion, server on CPU, bmx on CPU) where torch and
#    transformers are installed; 2. a smoke start of the reference on the GPU
#    (the sweep is skipped if it fails); 3. the whole sweep, nvidia-smi
#    sampled every 200 ms. What comes back: $OUT/{grid.txt, sweep_stderr.txt,
#    report.md, report.json, results.jsonl, bundle.tar.gz (logs, run.json,
#    report.html, the CPU test's output, the nvidia-smi timeline)}.
# With a run directory in .bmx-device/run (one that an earlier call brought
# back, cut short by the call's time limit), steps 1 and 2 are skipped and
# the sweep resumes it.
# MATRIX, CPU_TESTS (the -test.run pattern) and SMOKE_ARGS (the smoke
# server's flags) choose another sweep of the example: h200-moe-run.sh sets
# them for moe.toml.
set -u
SKIP_CPU_TEST=${SKIP_CPU_TEST:-}
MATRIX=${MATRIX:-examples/torch-gpu/matrix.toml}
CPU_TESTS=${CPU_TESTS:-TestConvert|TestMatrix|TestServerCPU}
export SMOKE_ARGS=${SMOKE_ARGS:---attention-backend math --dtype float32}
D=$PWD/.bmx-device
export TORCHGPU_MODEL=$D/stories260K.gguf BMX_BIN=$D/bmx PYTHONUNBUFFERED=1
B=/tmp/bundle
mkdir -p $B
nvidia-smi > $B/smi_before.txt 2>&1

resume=
if [ -d $D/run ]; then
  resume=/tmp/runs/resumed
  mkdir -p /tmp/runs && cp -r $D/run $resume
fi
[ -n "$resume$SKIP_CPU_TEST" ] || (cd examples/torch-gpu && timeout 100 $D/torchgpu.test -test.v -test.run "$CPU_TESTS") > $B/cputest.txt 2>&1
echo "cpu test exit $?" | tee -a $B/cputest.txt

[ -n "$resume" ] || timeout 60 ${PYTHON:-python3} - > $B/smoke.txt 2>&1 <<'PY'
import json, subprocess, sys, time, urllib.request
import os
srv = subprocess.Popen([sys.executable, "examples/torch-gpu/server.py", "--model", os.environ["TORCHGPU_MODEL"], "--port", "30999",
                        "--device", os.environ.get("SMOKE_DEVICE", "cuda")] + os.environ["SMOKE_ARGS"].split())
try:
    for _ in range(240):
        try:
            if urllib.request.urlopen("http://127.0.0.1:30999/health").status == 200:
                break
        except Exception:
            if srv.poll() is not None:
                sys.exit(f"server exited {srv.returncode}")
        time.sleep(0.25)
    req = urllib.request.Request("http://127.0.0.1:30999/v1/chat/completions", data=json.dumps(
        {"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 24, "temperature": 0}).encode())
    print(json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"])
finally:
    srv.terminate()
    srv.wait()
PY
smoke=$?
echo "smoke exit $smoke" | tee -a $B/smoke.txt
tail -3 $B/smoke.txt

if [ $smoke -eq 0 ]; then
  ( while true; do echo "$(date +%s.%N),$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)"; sleep 0.2; done ) > $B/smi_timeline.csv &
  sampler=$!
  if [ -n "$resume" ]; then
    timeout -s INT ${SWEEP_LIMIT:-400} $BMX_BIN sweep --resume $resume ${SWEEP_ARGS:-} > $OUT/grid.txt 2> $OUT/sweep_stderr.txt
  else
    timeout -s INT ${SWEEP_LIMIT:-400} $BMX_BIN sweep -c $MATRIX --var model=$TORCHGPU_MODEL --out /tmp/runs ${SWEEP_ARGS:-} > $OUT/grid.txt 2> $OUT/sweep_stderr.txt
  fi
  echo "sweep exit $?" >> $OUT/sweep_stderr.txt
  sleep 1
  kill $sampler
  # A resumed call's run is $resume: on a machine still warm from the call
  # before, /tmp/runs also holds that call's cut-short directory.
  dir=${resume:-$(ls -d /tmp/runs/* | head -1)}
  [ -f $dir/report.md ] || $BMX_BIN report $dir --format md -o $dir/report.md
  [ -f $dir/report.json ] || $BMX_BIN report $dir --format json -o $dir/report.json
  cp $dir/report.md $dir/report.json $dir/results.jsonl $OUT/
  cp -r $dir/logs $dir/run.json $dir/report.html $B/ 2>/dev/null
fi
ps -eo pid,pgid,sid,etime,cmd | grep -v grep | grep server.py > $B/ps_after.txt
nvidia-smi > $B/smi_after.txt 2>&1
tar czf $OUT/bundle.tar.gz -C /tmp bundle
