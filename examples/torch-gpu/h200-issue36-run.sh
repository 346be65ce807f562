#!/bin/bash
# Issue 36 on the device machine, from the repository root, with
# .bmx-device/ holding a cross-compiled bmx, the cross-compiled test binary
# and the model (see h200-run.sh):
#   GOOS=linux GOARCH=amd64 go build -o .bmx-device/bmx ./cmd/bmx
#   GOOS=linux GOARCH=amd64 go test -c -o .bmx-device/torchgpu.test ./examples/torch-gpu
#   cp ../shared/models/stories260K.gguf .bmx-device/
# 1. (beside the sweeps, on the CPU) the torch server's teacher forcing:
#    TestServerForced and TestServerCPU;
# 2. moe-faults.toml: three MoE runners x three faults injected in the
#    router every runner shares, a broken group's cell as the reference;
# 3. as much of moe.toml's naive and triton cells as the call leaves time
#    for, with every cell scored on the reference's own tokens: the degraded
#    floor's calibration with teacher forcing.
# What comes back: gpu.txt, forced_test.txt, faults_grid.txt,
# faults_stderr.txt, calib_grid.txt, calib_stderr.txt, runs.tar.gz (both
# run directories).
set -u
D=$PWD/.bmx-device
export TORCHGPU_MODEL=$D/stories260K.gguf BMX_BIN=$D/bmx PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $OUT/gpu.txt 2>&1
( cd examples/torch-gpu && timeout 150 $D/torchgpu.test -test.v -test.run 'TestServerForced|TestServerCPU$' > $OUT/forced_test.txt 2>&1; echo "exit $?" >> $OUT/forced_test.txt ) &
tests=$!
timeout -s INT ${FAULTS_LIMIT:-270} $D/bmx sweep -c examples/torch-gpu/moe-faults.toml --var model=$TORCHGPU_MODEL --out /tmp/faults > $OUT/faults_grid.txt 2> $OUT/faults_stderr.txt
echo "sweep exit $?" >> $OUT/faults_stderr.txt
timeout -s INT ${CALIB_LIMIT:-270} $D/bmx sweep -c examples/torch-gpu/moe.toml --var model=$TORCHGPU_MODEL --only moe=naive --only moe=triton --out /tmp/calib > $OUT/calib_grid.txt 2> $OUT/calib_stderr.txt
echo "sweep exit $?" >> $OUT/calib_stderr.txt
wait $tests
tar czf $OUT/runs.tar.gz -C /tmp faults calib
