#!/bin/bash
# Issue 38 on the device machine (one H100 or H200), from the repository
# root, with .bmx-device/ holding a cross-compiled bmx and the model:
#   GOOS=linux GOARCH=amd64 go build -ldflags="-s -w" -o .bmx-device/bmx ./cmd/bmx
#   cp ../shared/models/stories260K.gguf .bmx-device/
# and passed as carry [".bmx-device"].
#   fp4-run.sh selfcheck   the FP4 self-check alone (fp4_selfcheck.py)
#   fp4-run.sh sweep       the self-check without the model section, then,
#                          if it passed, moe-fp4.toml's sweep for
#                          SWEEP_LIMIT seconds (default 420), resumed from
#                          .bmx-device/fp4-run if that holds a run
# What comes back under $OUT: gpu.txt, selfcheck.txt, grid.txt,
# sweep_stderr.txt, run.tar.gz (the run directory).
set -u
D=$PWD/.bmx-device
export TORCHGPU_MODEL=$D/stories260K.gguf PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $OUT/gpu.txt 2>&1
case "${1:-selfcheck}" in
selfcheck)
  timeout 400 python3 examples/torch-gpu/fp4_selfcheck.py --timeout 150 2>&1 | tee $OUT/selfcheck.txt
  ;;
sweep)
  timeout 150 python3 examples/torch-gpu/fp4_selfcheck.py --no-model --timeout 60 > $OUT/selfcheck.txt 2>&1
  rc=$?
  tail -3 $OUT/selfcheck.txt
  if [ $rc -ne 0 ]; then echo "the FP4 self-check failed (exit $rc): no sweep"; exit 1; fi
  if [ -f $D/fp4-run/run.json ]; then
    mkdir -p /tmp/fp4 && cp -r $D/fp4-run /tmp/fp4/run
    args=(--resume /tmp/fp4/run)
  else
    args=(--out /tmp/fp4)
  fi
  timeout -s INT ${SWEEP_LIMIT:-420} $D/bmx sweep -c examples/torch-gpu/moe-fp4.toml --var model=$TORCHGPU_MODEL "${args[@]}" > $OUT/grid.txt 2> $OUT/sweep_stderr.txt
  echo "sweep exit $?" >> $OUT/sweep_stderr.txt
  tail -5 $OUT/sweep_stderr.txt
  cat $OUT/grid.txt
  tar czf $OUT/run.tar.gz -C /tmp fp4
  ;;
esac
