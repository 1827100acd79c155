#!/usr/bin/env bash
# The GPU check: the flagship audit, an Opacus plugin's one-run audit, the language-model one-run and
# membership audits and many reference models trained at once, each on CUDA and on the same machine's CPU,
# in at most 8 minutes; writes benchmarks/results_gpu.json (the GPU named). See benchmarks/gpu/measure.py
# and docs/performance.md ("GPU").
#
#   benchmarks/gpu/run.sh              # on a machine with a CUDA GPU
#   benchmarks/gpu/run.sh --dry-run    # on the CPU at tiny sizes (CI: tests/e2e/test_bench_gpu.py)
#
# PYTHON names the interpreter (default: python3 on the PATH).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" benchmarks/gpu/measure.py "$@"
