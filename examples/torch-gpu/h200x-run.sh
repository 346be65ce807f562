#!/bin/bash
# The multi-GPU slot run (slots.toml) on a device of several H200s
# (nvidia-h200-x2, -x4 or -x8), from the repository root, with .bmx-device/
# prepared as h200-run.sh says (bmx and torchgpu.test cross-compiled, the
# model copied):
#   GOOS=linux GOARCH=amd64 go build -o .bmx-device/bmx ./cmd/bmx
#   GOOS=linux GOARCH=amd64 go test -c -o .bmx-device/torchgpu.test ./examples/torch-gpu
#   cp ../shared/models/stories260K.gguf .bmx-device/
#
#   bash examples/torch-gpu/h200x-run.sh PHASE...
#
# Phases, in the order given (each fits one device call of 10 minutes; the
# times are from the MoE sweep on one H200, about 22 s a cell without the
# performance probe):
#   cpu     the CPU tests of the split server and the slot matrix
#           (TestPipelinePlan, TestMatrixSlots, TestServerCPUSplit), where
#           the device's python has torch and transformers (about 1 min)
#   scale1  slots.toml without its [[slot]]s on one GPU (CUDA_VISIBLE_DEVICES=0,
#           --slots 1): the baseline of the scaling ratio (about 4.5 min)
#   scaleN  the same 12 cells on N one-GPU slots (--slots N, N the GPUs, at
#           most 4; CUDA_VISIBLE_DEVICES limits bmx to them) (about 1.5 min)
#   mixed   slots.toml's own layout ("0", "1", "2,3": a 2-GPU slot beside two
#           1-GPU slots) with the leaking and the out-of-memory cell; on a
#           host of 2 GPUs, "0" and "1" instead (about 2 min)
#   split   one slot of two GPUs (SPLIT_GPUS, default 0,1), every cell split
#           over both: the 2-GPU cells that a host of 2 cannot put beside
#           1-GPU slots (about 4.5 min)
# What comes back, per phase, in $OUT/<phase>/: grid.txt (what bmx printed),
# sweep_stderr.txt, wall.txt (start, end and seconds of the sweep, the slots),
# report.md, report.json, results.jsonl, smi_timeline.csv (nvidia-smi every
# 500 ms: timestamp, index, memory.used, utilization.gpu, for every GPU),
# run.tar.gz (the run directory: run.json, every cell's log, report.html),
# ps_after.txt (server.py processes left) and smi_after.txt; cpu/cputest.txt
# for the CPU tests. The scaling ratio is scale1's seconds over scaleN's.
set -u
EX=examples/torch-gpu
D=$PWD/.bmx-device
BMX=$D/bmx
MODEL=$D/stories260K.gguf
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
N=$(( NGPU < 4 ? NGPU : 4 ))
echo "h200x-run: $NGPU GPUs, phases: $*" >&2
if [ "$NGPU" -lt 2 ]; then
  echo "h200x-run: this is for a host of 2 or more GPUs; nvidia-smi -L says:" >&2
  nvidia-smi -L >&2
  exit 2
fi

# slots.toml without its [[slot]]s (each is a "[[slot]]" line and a "gpus =
# " line), next to it so that {dir} is the example's folder; and the layout
# of a 2-GPU host.
NOSLOT=$EX/.slots-noslot.toml
X2=$EX/.slots-x2.toml
trap 'rm -f "$NOSLOT" "$X2"' EXIT
awk '/^\[\[slot\]\]$/ {skip = 1; next} skip && /^gpus = / {skip = 0; next} {skip = 0; print}' $EX/slots.toml > "$NOSLOT"
{ cat "$NOSLOT"; printf '[[slot]]\ngpus = "0"\n[[slot]]\ngpus = "1"\n'; } > "$X2"

# sweep PHASE CUDA_VISIBLE_DEVICES [bmx sweep's arguments]: one sweep, with
# nvidia-smi sampled beside it, into $OUT/PHASE.
sweep() {
  local phase=$1 cvd=$2
  shift 2
  local o=$OUT/$phase runs=/tmp/runs-$phase
  mkdir -p "$o"
  rm -rf "$runs"
  nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu --format=csv -lms 500 > "$o/smi_timeline.csv" 2>&1 &
  local sampler=$!
  local t0 t1
  t0=$(date +%s.%N)
  env ${cvd:+CUDA_VISIBLE_DEVICES=$cvd} timeout -s INT "${SWEEP_LIMIT:-540}" "$BMX" sweep "$@" \
    --var model="$MODEL" --var python="$PY" --out "$runs" > "$o/grid.txt" 2> "$o/sweep_stderr.txt"
  echo "sweep exit $?" >> "$o/sweep_stderr.txt"
  t1=$(date +%s.%N)
  sleep 1
  kill $sampler
  awk -v a="$t0" -v b="$t1" -v c="$cvd" -v args="$*" \
    'BEGIN { printf "start %s\nend %s\nseconds %.1f\nCUDA_VISIBLE_DEVICES %s\nbmx sweep %s\n", a, b, b - a, c, args }' > "$o/wall.txt"
  local dir
  dir=$(ls -d "$runs"/* 2>/dev/null | head -1)
  if [ -n "$dir" ]; then
    [ -f "$dir/report.md" ] || "$BMX" report "$dir" --format md -o "$dir/report.md"
    [ -f "$dir/report.json" ] || "$BMX" report "$dir" --format json -o "$dir/report.json"
    cp "$dir/report.md" "$dir/report.json" "$dir/results.jsonl" "$o/"
    tar czf "$o/run.tar.gz" -C "$runs" .
  fi
  ps -eo pid,pgid,sid,etime,cmd | grep -v grep | grep server.py > "$o/ps_after.txt"
  nvidia-smi > "$o/smi_after.txt" 2>&1
  echo "h200x-run: $phase: $(grep '^seconds' "$o/wall.txt"), $(tail -1 "$o/sweep_stderr.txt")" >&2
}

for phase in "$@"; do
  case $phase in
  cpu)
    mkdir -p "$OUT/cpu"
    (cd $EX && TORCHGPU_MODEL=$MODEL TORCHGPU_PYTHON=$PY timeout 300 "$D/torchgpu.test" -test.v \
      -test.run 'TestPipelinePlan|TestMatrixSlots|TestServerCPUSplit') > "$OUT/cpu/cputest.txt" 2>&1
    echo "cpu test exit $?" | tee -a "$OUT/cpu/cputest.txt" >&2
    ;;
  scale1) sweep scale1 0 -c "$NOSLOT" --slots 1 ;;
  scaleN) sweep scaleN "$(seq -s, 0 $((N - 1)))" -c "$NOSLOT" --slots "$N" ;;
  mixed)
    if [ "$NGPU" -ge 4 ]; then
      sweep mixed "" -c $EX/slots.toml
    else
      sweep mixed "" -c "$X2"
    fi
    ;;
  split) sweep split "${SPLIT_GPUS:-0,1}" -c "$NOSLOT" --slots 1 ;;
  *)
    echo "h200x-run: unknown phase $phase (cpu, scale1, scaleN, mixed, split)" >&2
    exit 2
    ;;
  esac
done
