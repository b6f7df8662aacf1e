"""``need()``: how a test says that a part the repo's setup installs is missing.

It skips with a message naming the part. A skip is not a pass: under CI (``CI`` set, as
``.ci/run`` runs) tests/conftest.py turns every skip into a failure, this one included.
"""
from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def need(part: str, why: str, fix: str = "`make setup` installs it") -> None:
    pytest.skip(f"{part} is missing ({why}); {fix}")


def capture_env_missing() -> str | None:
    """Why a live capture cannot run here (no vLLM environment or no opencode), or None."""
    from viewer.capture.agent import find_opencode
    from viewer.capture.backends import vllm_python

    try:
        vllm_python()
        find_opencode()
    except (FileNotFoundError, RuntimeError) as e:
        return str(e)
    return None
