#!/usr/bin/env bash
# The whole test suite, offline. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       GRADIO_RUN_HISTORY=False NO_PROXY=127.0.0.1,localhost
exec .venv/bin/python -m pytest "$@"
