#!/bin/bash
# On the GPU machine: sample nvidia-smi every 200 ms while bmx sweeps three
# cells whose servers hold GPU memory and die in three ways.
set -u
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits > "$OUT/smi_query.txt"
( while true; do echo "$(date +%s.%N),$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)"; sleep 0.2; done ) > "$OUT/smi_timeline.csv" &
sampler=$!
start=$(date +%s.%N)
./bmx sweep -c examples/gpu-hygiene/matrix.toml --out /tmp/runs > "$OUT/sweep_stdout.txt" 2> "$OUT/sweep_stderr.txt"
echo "exit $? start $start end $(date +%s.%N)" >> "$OUT/sweep_stderr.txt"
sleep 1
kill $sampler
dir=$(ls -d /tmp/runs/*)
cp "$dir/results.jsonl" "$OUT/results.jsonl"
cp "$dir/run.json" "$OUT/run.json"
cat "$dir"/logs/*.log > "$OUT/server_logs.txt"
ps -eo pid,pgid,sid,cmd | grep -c "hold.py" >> "$OUT/sweep_stderr.txt"
nvidia-smi > "$OUT/smi_after.txt"
