#!/usr/bin/env bash
# Idempotent, cached set-up of the producers' own packages, the test oracles of the real-world formats
# (issue 35; docs/FORMATS.md §8): .venv-producers holds Inspect AI (its log reader reads .json and .eval logs).
# Its own venv: inspect_ai's dependencies (fsspec, aiohttp, ...) must not move the app's pins.
# Skipped with PRODUCERS_SETUP=0 (the tests that need it then fail under CI, as every missing part does).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${PRODUCERS_SETUP:-1}" = 0 ] && { echo "setup_producers: skipped (PRODUCERS_SETUP=0)"; exit 0; }
PY=${PYTHON:-python3}
PV=${PRODUCERS_VENV:-.venv-producers}
deps="inspect_ai==0.3.285"
stamp="$PV/.producers-stamp"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$deps" ] && exit 0
echo "setup_producers: venv $PV: pip install $deps"
[ -x "$PV/bin/python" ] || "$PY" -m venv "$PV"
# shellcheck disable=SC2086
"$PV/bin/python" -m pip install -q --disable-pip-version-check $deps 2>&1 | { grep -v "WARNING: Location" || true; }
"$PV/bin/python" -c "import inspect_ai.log" || { echo "setup_producers: inspect_ai does not import in $PV" >&2; exit 1; }
echo "$deps" > "$stamp"
