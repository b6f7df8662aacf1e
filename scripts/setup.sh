#!/usr/bin/env bash
# Idempotent, cached set-up for development, tests and CI.
# - Debian packages the tests need (chromium for browser tests, ripgrep for opencode).
# - A virtual environment at .venv with requirements-dev.txt, reinstalled only when
#   the requirement files change (hash stamp).
# APP_ONLY=1 (what `make app` uses): just the viewer's own .venv, so a fresh clone serves the
# app within about a minute; captures need `make setup` (the vLLM env, opencode, the sandbox).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
APP_ONLY=${APP_ONLY:-0}

need_apt=()
if [ "$APP_ONLY" != 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium fonts-dejavu-core)
  command -v rg >/dev/null 2>&1 || need_apt+=(ripgrep)
  # the agent's sandbox (viewer/capture/sandbox.py): namespaces + the proxy forwarded into them
  command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
  command -v socat >/dev/null 2>&1 || need_apt+=(socat)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: apt-get install ${need_apt[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: warning: cannot install ${need_apt[*]} (need root + apt-get); the tests that need them fail under CI" >&2
  fi
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp="$VENV/.requirements.sha256"
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: pip install -r requirements-dev.txt"
  # (this machine's pip config names local mirrors that may be absent: drop those warnings, keep errors)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt 2>&1 \
    | { grep -v "WARNING: Location" || true; }
  echo "$want" > "$stamp"
fi
[ "$APP_ONLY" = 1 ] && exit 0
# torch for trainer-side logprobs (`python -m viewer rescore`, the app's rescore panel). Not in
# requirements.txt: the Space serves without it (the panel then says how to get it). The exact pin
# resolves to a local CPU wheel; an unpinned torch would download a multi-GB CUDA build.
rstamp="$VENV/.requirements-rescore.sha256"
rwant=$(sha256sum requirements-rescore.txt | cut -d' ' -f1)
if [ ! -f "$rstamp" ] || [ "$(cat "$rstamp")" != "$rwant" ]; then
  echo "setup: pip install -r requirements-rescore.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-rescore.txt 2>&1 \
    | { grep -v "WARNING: Location" || true; }
  echo "$rwant" > "$rstamp"
fi
# the optional Ray engine of the drift scan (tests/test_ray_engine.py); its own stamp, so the app-only set-up stays lean
scale_stamp="$VENV/.requirements-scale.sha256"
want_scale=$(sha256sum requirements-scale.txt | cut -d' ' -f1)
if [ ! -f "$scale_stamp" ] || [ "$(cat "$scale_stamp")" != "$want_scale" ]; then
  echo "setup: pip install -r requirements-scale.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-scale.txt 2>&1 \
    | { grep -v "WARNING: Location" || true; }
  echo "$want_scale" > "$scale_stamp"
fi
bash scripts/setup_capture.sh  # vLLM (CPU/GPU) env + opencode for live capture; CAPTURE_SETUP=0 skips
bash scripts/setup_oracle.sh  # .venv-trl: TRL 1.14.0 + 1.16.0 side by side as the test oracle; ORACLE_SETUP=0 skips
