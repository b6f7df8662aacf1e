#!/usr/bin/env bash
# Idempotent, cached set-up for the TRL test oracle (docs/TRAINER.md "Using TRL itself as the oracle in tests"):
# - .venv-trl : torch (CPU build), transformers (same pin as requirements.txt), accelerate, datasets, numpy, aiohttp
#               and openenv (TRL's harness module imports openenv.core.harness)
# - .venv-trl/trl-<version> : each TRL release installed --no-deps into its own folder, side by side; the runner
#               picks one with PYTHONPATH=.venv-trl/trl-<version> (tests/oracle/trl_oracle.py)
# Skipped entirely with ORACLE_SETUP=0. Stamped, so a second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${ORACLE_SETUP:-1}" = 0 ] && { echo "setup_oracle: skipped (ORACLE_SETUP=0)"; exit 0; }
PY=${PYTHON:-python3}
TV=${TRL_VENV:-.venv-trl}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TRANSFORMERS_VERSION=${TRANSFORMERS_VERSION:-5.23.0}
OPENENV_VERSION=${OPENENV_VERSION:-0.10.0}
TRL_VERSIONS=${TRL_VERSIONS:-"1.14.0 1.16.0"}

# One resolve for the shared environment. Plain torch==X resolves to the local X+cpu wheel where one is on the
# find-links (as for .venv-vllm); the check below says so when a CUDA build was picked instead.
deps="torch==${TORCH_VERSION} transformers==${TRANSFORMERS_VERSION} tokenizers accelerate datasets numpy aiohttp jinja2 openenv==${OPENENV_VERSION}"
stamp="$TV/.oracle-stamp"
want="$deps | trl $TRL_VERSIONS"
up_to_date() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for v in $TRL_VERSIONS; do [ -f "$TV/trl-$v/trl/__init__.py" ] || return 1; done
}
up_to_date && exit 0

pip_q() {
  "$TV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 | { grep -v "WARNING: Location" || true; }
  return "${PIPESTATUS[0]}"
}

echo "setup_oracle: venv $TV"
[ -x "$TV/bin/python" ] || "$PY" -m venv "$TV"
echo "setup_oracle: pip install $deps"
# shellcheck disable=SC2086
pip_q $deps || { echo "setup_oracle: pip install of the shared deps failed" >&2; exit 1; }
torch_v=$("$TV/bin/python" -c "import torch; print(torch.__version__)") \
  || { echo "setup_oracle: torch does not import in $TV" >&2; exit 1; }
case "$torch_v" in
  *+cpu) echo "setup_oracle: torch $torch_v (CPU build)" ;;
  *) echo "setup_oracle: warning: torch $torch_v is not a +cpu build (imports fine; the CUDA libs cost disk only)" >&2 ;;
esac

for v in $TRL_VERSIONS; do
  echo "setup_oracle: pip install --no-deps --target $TV/trl-$v trl==$v"
  rm -rf "$TV/trl-$v"
  pip_q --no-deps --target "$TV/trl-$v" "trl==$v" || { echo "setup_oracle: pip install trl==$v failed" >&2; exit 1; }
done

for v in $TRL_VERSIONS; do
  got=$(PYTHONPATH="$TV/trl-$v" "$TV/bin/python" -c "import trl, trl.experimental.async_grpo.openenv_harness as h, trl.experimental.async_grpo.async_rollout_worker as w; print(trl.__version__)" 2>/dev/null | tail -n 1) || got=""
  if [ "$got" != "$v" ]; then
    echo "setup_oracle: trl $v does not import from $TV/trl-$v (got '${got:-import error}'); run:" >&2
    echo "  PYTHONPATH=$TV/trl-$v $TV/bin/python -c 'import trl.experimental.async_grpo.openenv_harness'" >&2
    exit 1
  fi
  echo "setup_oracle: trl $got imports (openenv_harness, async_rollout_worker)"
done
echo "$want" > "$stamp"
