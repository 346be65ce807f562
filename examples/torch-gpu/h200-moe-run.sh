#!/bin/bash
# The live MoE sweep on an H200 (moe.toml: MoE runner x dtype x
# renormalisation x attention GEMM), through h200-run.sh, from the
# repository root, with .bmx-device/ prepared as h200-run.sh says. Step 1
# runs the MoE tests on CPU (the conversion, the matrix, the naive and
# grouped_mm runners through the server against the plain-Python MoE), step
# 2 a smoke start of the reference cell (naive, float32), step 3 the sweep;
# .bmx-device/run resumes a sweep cut short. What comes back is
# h200-run.sh's.
export MATRIX=examples/torch-gpu/moe.toml
export CPU_TESTS='TestConvertMoE|TestMatrixMoE|TestServerCPUMoE'
export SMOKE_ARGS='--attention-backend efficient --dtype float32 --moe-runner naive'
exec bash "$(dirname "$0")/h200-run.sh"
