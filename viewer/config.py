"""One settings object: every knob of the app and CLI, its default, env override and help.

Read once with :func:`Settings.from_env`. ``tests/test_config.py`` checks that every
setting is documented in README.md.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "REPO_ROOT", "SAMPLE_DIR"]

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DIR = REPO_ROOT / "sample_data"


def _setting(default, env: str, help: str):
    return field(default=default, metadata={"env": env, "help": help})


@dataclass(frozen=True)
class Settings:
    data_root: str = _setting(str(SAMPLE_DIR), "VIEWER_DATA_ROOT",
                              "Typed local paths must resolve inside this folder; anything else is refused.")
    sample: str = _setting(str(SAMPLE_DIR / "qwen3-tiny"), "VIEWER_SAMPLE",
                           "Capture folder (or file) the app opens on start.")
    max_upload_mb: int = _setting(200, "VIEWER_MAX_UPLOAD_MB",
                                  "Largest upload accepted (per file, zip included), in MB.")
    max_file_mb: int = _setting(1024, "VIEWER_MAX_FILE_MB",
                                "Largest single trace file a reader will parse, in MB.")
    page_tokens: int = _setting(20000, "VIEWER_PAGE_TOKENS",
                                "Tokens painted per page in the token view; longer turns are paged.")
    context_tail: int = _setting(512, "VIEWER_CONTEXT_TAIL",
                                 "Prompt tokens shown when the context is collapsed to its tail.")
    low_logprob: float = _setting(-2.5, "VIEWER_LOW_LOGPROB",
                                  "Tokens below this logprob are flagged as low-probability.")
    tokenizer: str = _setting("", "VIEWER_TOKENIZER",
                              "Tokenizer override: a local directory or a Hub name (Hub only when online).")
    cache_rollouts: int = _setting(16, "VIEWER_CACHE_ROLLOUTS",
                                   "Parsed rollouts kept in memory (LRU) across sessions.")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        kwargs = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            kwargs[f.name] = type(f.default)(raw)
        return cls(**kwargs)

    @classmethod
    def docs(cls) -> list[tuple[str, str, object, str]]:
        """(name, env var, default, help) for every setting: README and --help use it."""
        return [(f.name, f.metadata["env"], f.default, f.metadata["help"]) for f in fields(cls)]
