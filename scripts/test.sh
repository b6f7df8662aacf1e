#!/usr/bin/env bash
# The whole test suite, offline. Extra arguments go to pytest.
# RI_TEST_WORKERS=N (make test / make test-fast: 2): N pytest-xdist workers, tests grouped so each
# shared fixture (vLLM server, TRL oracle, ...) is still made once (tests/tiers.py); unset or 0: one process.
set -euo pipefail
cd "$(dirname "$0")/.."
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       GRADIO_RUN_HISTORY=False NO_PROXY=127.0.0.1,localhost
# Compiled bytecode is kept (__pycache__, ignored by git): with PYTHONDONTWRITEBYTECODE set (some shells
# and images set it) every run, and every `python -m viewer` a test starts, recompiled the viewer and
# pytest rewrote all test modules again: 15 CPU s per collection instead of 6.
unset PYTHONDONTWRITEBYTECODE
workers=${RI_TEST_WORKERS:-0}
if [ "$workers" != 0 ]; then
  set -- -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"  # groups in tests/tiers.py order: longest first
  # One OpenMP thread per process (torch in the workers and in the CLIs and oracles a test starts): with two
  # workers on two cores, torch's second thread only spun while waiting for a core (test_rescore_dataset's
  # torch tests: 89 CPU s with two threads, 55 s with one, at the same load). A run that sets it keeps its own.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi
exec .venv/bin/python -m pytest "$@"
