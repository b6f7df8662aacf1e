"""``need()``: how a test says that a part the repo's setup installs is missing.

A skip is not a pass: under CI (``CI`` set, as ``.ci/run`` runs) a missing part fails the
test with a message naming it; on a developer's machine the test is skipped.
"""
from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def need(part: str, why: str) -> None:
    msg = f"{part} is missing ({why}); `make setup` installs it"
    if in_ci():
        pytest.fail(f"CI: {msg}", pytrace=False)
    pytest.skip(msg)
