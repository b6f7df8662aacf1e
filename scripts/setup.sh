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
# pip install -r FILE into the venv unless STAMP already holds the hash of HASHED (the files it
# depends on); so a second run is a no-op
pip_stamped() {  # FILE STAMP HASHED...
  local file=$1 stamp=$2; shift 2
  local want
  want=$(cat "$@" | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: pip install -r $file"
    # (this machine's pip config names local mirrors that may be absent: drop those warnings, keep errors)
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$file" 2>&1 \
      | { grep -v "WARNING: Location" || true; }
    echo "$want" > "$stamp"
  fi
}
pip_stamped requirements-dev.txt "$VENV/.requirements.sha256" requirements.txt requirements-dev.txt
[ "$APP_ONLY" = 1 ] && exit 0
# torch for trainer-side logprobs (`python -m viewer rescore`, the app's rescore panel). Not in
# requirements.txt: the Space serves without it (the panel then says how to get it). The exact pin
# resolves to a local CPU wheel; an unpinned torch would download a multi-GB CUDA build.
pip_stamped requirements-rescore.txt "$VENV/.requirements-rescore.sha256" requirements-rescore.txt
# the optional Ray engine of the drift scan (tests/test_ray_engine.py); its own stamp, so the app-only set-up stays lean
pip_stamped requirements-scale.txt "$VENV/.requirements-scale.sha256" requirements-scale.txt
bash scripts/setup_capture.sh  # vLLM (CPU/GPU) env + opencode for live capture; CAPTURE_SETUP=0 skips
bash scripts/setup_oracle.sh  # .venv-trl: TRL 1.14.0 + 1.16.0 side by side as the test oracle; ORACLE_SETUP=0 skips
bash scripts/setup_producers.sh  # .venv-producers: the producers' own readers (Inspect AI) as test oracles
