#!/usr/bin/env bash
# Every benchmark in bench/ once, at sizes that fit this 2-core machine (minutes, not hours).
# Each prints its ratio against a baseline measured in the same run, absolute figures beside it.
# BENCH_FULL=1: the sizes of docs/SPEED.md (690 MB trace, 1 GB parquet; long). Extra args: a subset, e.g.
#   bash scripts/bench.sh load drift
set -euo pipefail
cd "$(dirname "$0")/.."
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       NO_PROXY=127.0.0.1,localhost
PY=.venv/bin/python
full=${BENCH_FULL:-0}
declare -A ARGS=(
  [tokenizer]=""
  [token_view]=""
  [load]="$([ "$full" = 1 ] && echo "--mb 690" || echo "--quick")"
  [drift]=""
  [rows]="$([ "$full" = 1 ] && echo "--mb 1024" || echo "--mb 64")"
  [room]="$([ "$full" = 1 ] && echo "" || echo "--ns 1,4 --rounds 1")"
  [rescore]="--repeats 1"
  [rescore_dataset]="$([ "$full" = 1 ] && echo "--copies 6 --repeats 3" || echo "--copies 3")"
  [capture]=""
  [export]=""
)
ORDER=(tokenizer token_view load drift rows room rescore rescore_dataset capture export)
want=("$@")
[ ${#want[@]} -eq 0 ] && want=("${ORDER[@]}")
mkdir -p bench/results
for name in "${want[@]}"; do
  [ -f "bench/bench_$name.py" ] || { echo "bench.sh: no bench/bench_$name.py (have: ${ORDER[*]})" >&2; exit 2; }
  echo "=== bench_$name ${ARGS[$name]:-}"
  # shellcheck disable=SC2086
  $PY "bench/bench_$name.py" ${ARGS[$name]:-} 2>&1 | tee "bench/results/bench_$name.txt"
done
