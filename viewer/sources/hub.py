"""``hf://datasets/OWNER/NAME[@REV][/path]``: Hub datasets read file by file through fsspec.

Everything goes through one fsspec filesystem: ``huggingface_hub.HfFileSystem`` in real
use, any fsspec filesystem laid out like the Hub (``datasets/OWNER/NAME/...``) in tests
(:func:`use_filesystem`). Two layouts:

* a **capture folder** (``trace.json``, ``turns.json``, ``task.json``, ...): just those
  files are fetched into a local cache and read by the capture reader;
* a **row dataset** (parquet / JSONL / JSON data files): files are chosen by config and
  split (README ``configs:`` when present, else folder / file-name conventions) and read
  lazily by :class:`~viewer.sources.rowdata.RowDataset` (row groups, line ranges).

Failures become one clear message: offline (``HF_HUB_OFFLINE``), gated, missing repo,
missing path, missing split/config, network errors.
"""
from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from viewer.layout import CAPTURE_FILES, RECORD_NAMES
from viewer.sources.rowdata import DataFile, data_kind

__all__ = ["HubSpec", "parse_hf", "use_filesystem", "use_factory", "read_token", "reader_tag", "hub_filesystem",
           "BudgetedFS", "HubError", "HubNotFound",
           "CAPTURE_FILES", "list_files", "select_data_files", "fetch_capture", "hub_call", "card_configs"]

_MARKERS = RECORD_NAMES
_SPEC = re.compile(r"^hf://datasets/([^/@\s]+)/([^/@\s]+)(?:@([^/\s]+))?(?:/(.*))?$")
_FS: list[Any] = []
_FACTORY: list[Callable[..., Any]] = []


class HubError(Exception):
    """Reading from the Hub failed; the message is for the user."""


class HubNotFound(HubError):
    pass


@dataclass(frozen=True)
class HubSpec:
    repo: str
    revision: str | None = None
    path: str = ""

    @property
    def root(self) -> str:
        return f"datasets/{self.repo}" + (f"@{self.revision}" if self.revision else "")

    @property
    def base(self) -> str:
        return f"{self.root}/{self.path}".rstrip("/")

    def __str__(self) -> str:
        return f"hf://{self.base}"


def parse_hf(spec: str) -> HubSpec:
    m = _SPEC.match(spec.strip())
    if not m:
        raise HubNotFound(f"{spec}: not a Hub dataset address; expected hf://datasets/OWNER/NAME[/path]")
    return HubSpec(f"{m.group(1)}/{m.group(2)}", m.group(3), (m.group(4) or "").strip("/"))


@contextlib.contextmanager
def use_filesystem(fs) -> Iterator[None]:
    """Use ``fs`` instead of HfFileSystem (tests: a local directory standing in for the Hub)."""
    _FS.append(fs)
    try:
        yield
    finally:
        _FS.remove(fs)


@contextlib.contextmanager
def use_factory(factory: Callable[..., Any]) -> Iterator[None]:
    """Build filesystems with ``factory(token=...)`` instead of ``HfFileSystem(token=...)``: the
    place the real one is constructed, so a test sees exactly the token a read would use."""
    _FACTORY.append(factory)
    try:
        yield
    finally:
        _FACTORY.remove(factory)


def _offline() -> bool:
    from viewer.config import env_flag

    return env_flag("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE"))


def read_token(settings=None, visitor_token: str | None = None) -> str | bool | None:
    """The token a Hub read is made with (the one place it is decided).

    Public mode: the visitor's own sign-in token, else ``False`` — no token at all, so
    huggingface_hub does not fall back to ``HF_TOKEN`` or a cached login and an anonymous
    visitor reads only public datasets. Local mode: the token given, else ``HF_TOKEN``
    (None: huggingface_hub's own lookup, e.g. ``hf auth login``)."""
    if settings is None:
        from viewer.config import Settings

        settings = Settings.from_env()
    visitor_token = (visitor_token or "").strip() or None
    if settings.public_mode():
        return visitor_token or False
    return visitor_token or os.environ.get("HF_TOKEN") or None


def reader_tag(token: str | bool | None) -> str:
    """Who a read was made as, for cache keys: ``anon``, ``env`` (the app's own), or a hash of
    the visitor's token — a private dataset fetched with one token is never served to another."""
    if token is False:
        return "anon"
    if not token:
        return "env"
    return "t" + hashlib.sha256(str(token).encode()).hexdigest()[:16]


def hub_filesystem(visitor_token: str | None = None, settings=None, *, token: str | bool | None | object = ...):
    """The filesystem Hub reads go through, built with :func:`read_token`'s token (or ``token``)
    and bounded by the ``hub_mb`` budget (bytes read for one source)."""
    if token is ...:
        token = read_token(settings, visitor_token)
    if _FS:
        fs = _FS[-1]
    elif _FACTORY:
        fs = _FACTORY[-1](token=token)
    else:
        if _offline():
            raise HubError("the Hugging Face Hub is not reachable: offline mode is on (HF_HUB_OFFLINE=1). "
                           "Unset HF_HUB_OFFLINE (and connect) to open hf:// datasets, or download the files "
                           "and open them locally.")
        from huggingface_hub import HfFileSystem

        # a visitor's token is not kept in fsspec's instance cache after the read is done
        fs = HfFileSystem(token=token, skip_instance_cache=isinstance(token, str))
    from viewer.config import Settings

    return BudgetedFS(fs, (settings or Settings.from_env()).limits(), reader_tag(token))


class BudgetedFS:
    """An fsspec filesystem whose file reads count against the ``hub_mb`` budget of one source
    (every other call goes through unchanged). ``reader`` names who reads (see :func:`reader_tag`)."""

    def __init__(self, fs, lim, reader: str):
        self.fs, self.limits, self.reader = fs, lim, reader
        self.read = 0

    def __getattr__(self, name: str):
        return getattr(self.fs, name)

    def count(self, n: int) -> None:
        self.read += n
        self.limits.check_bytes("hub_mb", self.read, "bytes read from the Hub for this source")

    def open(self, path: str, mode: str = "rb", **kw):
        from viewer.sources.countingfile import CountingFile

        return CountingFile(self.fs.open(path, mode, **kw), self.count)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kw) -> bytes:
        data = self.fs.cat_file(path, start=start, end=end, **kw)
        self.count(len(data))
        return data


def _token_hint() -> str:
    """How a reader gets access: their own sign-in on a public app, HF_TOKEN on their machine."""
    from viewer.config import Settings

    return "sign in with Hugging Face" if Settings.from_env().public_mode() else "set HF_TOKEN"


def hub_call(spec: HubSpec, fn: Callable[[], Any]) -> Any:
    """Run a filesystem call, turning Hub/network exceptions into one clear HubError."""
    try:
        return fn()
    except HubError:
        raise
    except Exception as e:  # classified by name: huggingface_hub's error classes
        names = {c.__name__ for c in type(e).__mro__}
        if "OfflineModeIsEnabled" in names:
            raise HubError(f"{spec}: offline mode is on (HF_HUB_OFFLINE=1); the Hub cannot be reached") from None
        if "GatedRepoError" in names:
            raise HubError(f"{spec}: dataset {spec.repo} is gated: accept its conditions on huggingface.co "
                           f"and {_token_hint()}") from None
        if "RepositoryNotFoundError" in names:
            raise HubNotFound(f"{spec}: dataset {spec.repo} not found (or private: {_token_hint()})") from None
        if "RevisionNotFoundError" in names:
            raise HubNotFound(f"{spec}: revision {spec.revision!r} not found") from None
        if ("EntryNotFoundError" in names or isinstance(e, FileNotFoundError)) and not spec.path:
            raise HubNotFound(f"{spec}: dataset {spec.repo} not found (or private: {_token_hint()})") from None
        if "EntryNotFoundError" in names or isinstance(e, FileNotFoundError):
            raise HubNotFound(f"{spec}: no such file or folder in {spec.repo}") from None
        if isinstance(e, (ConnectionError, TimeoutError)) or "ConnectError" in names or "HTTPError" in names:
            raise HubError(f"{spec}: cannot reach the Hub: {type(e).__name__}: {e}") from None
        raise


def list_files(fs, spec: HubSpec) -> tuple[dict[str, int | None], bool]:
    """({path relative to spec.base: size} of every file under the base, base-is-a-file)."""
    def go():
        info = fs.info(spec.base)
        if info.get("type") == "file":
            return {Path(spec.base).name: info.get("size")}, True
        found = fs.find(spec.base, detail=True)
        base = spec.base.rstrip("/") + "/"
        out = {}
        for p, d in found.items():
            rel = p[len(base):] if p.startswith(base) else p
            if d.get("type", "file") == "file":
                out[rel] = d.get("size")
        return out, False
    return hub_call(spec, go)


def card_configs(fs, spec: HubSpec, limits=None) -> list[dict[str, Any]]:
    """The card's typed ``configs:`` (viewer.sources.readme_meta: no aliases, nesting budgeted)."""
    if spec.path:
        return []
    try:
        text = hub_call(spec, lambda: fs.cat_file(f"{spec.root}/README.md")).decode("utf-8", "replace")
    except HubError:
        return []
    from viewer.budgets import BudgetExceeded
    from viewer.sources.readme_meta import ReadmeError, readme_configs

    if limits is None:
        from viewer.config import Settings

        limits = Settings.from_env().limits()
    try:
        return readme_configs(text, limits)
    except (ReadmeError, BudgetExceeded) as e:
        raise HubError(f"{spec}: README.md: {e}") from None


def _split_re(split: str) -> re.Pattern:
    return re.compile(rf"(^|/)({re.escape(split)})([-_.0-9/]|$)")


def select_data_files(files: dict[str, int | None], *, split: str | None, config: str | None,
                      configs: list[dict[str, Any]] | None = None) -> tuple[list[str], str]:
    """Data files for (config, split) and a note saying what was chosen. Raises HubNotFound."""
    data = sorted(p for p in files if data_kind(p) and not any(part.startswith(".") for part in p.split("/"))
                  and not p.lower().endswith(("dataset_infos.json", "dataset_info.json", "tokenizer_provenance.json",
                                              "tokenizer.json", "tokenizer_config.json", "config.json")))
    if configs:
        names = [str(c.get("config_name", "default")) for c in configs]
        pick = next((c for c in configs if str(c.get("config_name", "default")) == config), None) if config else \
            next((c for c in configs if c.get("default")), configs[0])
        if pick is None:
            raise HubNotFound(f"no config {config!r}; configs: {', '.join(names)}")
        df = pick.get("data_files")
        splits: dict[str, list[str]] = {}
        if isinstance(df, str):
            splits["train"] = [df]
        elif isinstance(df, list):
            for item in df:
                if isinstance(item, str):
                    splits.setdefault("train", []).append(item)
                elif isinstance(item, dict):
                    pats = item.get("path")
                    splits.setdefault(str(item.get("split", "train")),
                                      []).extend(pats if isinstance(pats, list) else [str(pats)])
        if splits:
            want = split or ("train" if "train" in splits else next(iter(splits)))
            if want not in splits:
                raise HubNotFound(f"no split {want!r} in config {pick.get('config_name', 'default')!r}; "
                                  f"splits: {', '.join(splits)}")
            chosen = [p for p in data if any(fnmatch.fnmatch(p, pat) for pat in splits[want])]
            if chosen:
                return chosen, f"config {pick.get('config_name', 'default')!r}, split {want!r}: {len(chosen)} file(s)"
    if config:
        data = [p for p in data if p.split("/")[0] == config or f"/{config}/" in f"/{p}"]
        if not data:
            raise HubNotFound(f"no config {config!r} (no folder of that name holding data files)")
    if split:
        chosen = [p for p in data if _split_re(split).search(p)]
        if not chosen:
            raise HubNotFound(f"no split {split!r} among {len(data)} data file(s)")
        return chosen, f"split {split!r}: {len(chosen)} file(s)"
    is_train = _split_re("train").search
    train = [p for p in data if is_train(p)]
    if train and len(train) < len(data):
        return train, f"split 'train': {len(train)} of {len(data)} data file(s) (choose another with --split)"
    return data, f"{len(data)} data file(s)"


def is_capture_layout(files: dict[str, int | None]) -> bool:
    return any(name in files for name in _MARKERS)


def cache_dir(spec: HubSpec, reader: str = "env") -> Path:
    """The local folder of ``spec``'s fetched capture files, one per reader (:func:`reader_tag`):
    files fetched with one visitor's token are never found by another."""
    from viewer.config import Settings

    root = Path(Settings.from_env().hub_cache or Path(tempfile.gettempdir()) / "rollout-inspector-hub")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{spec.repo}@{spec.revision or 'main'}/{spec.path}")[:200]
    return root / reader / safe


def fetch_capture(fs, spec: HubSpec, files: dict[str, int | None],
                  progress: Callable[[str], None] | None = None, *, max_file_mb: float | None = None) -> Path:
    """Download just the capture files (a few, by name) into a local cache folder.

    Each file is refused when the listing says it is over ``max_file_mb`` (and stopped when it
    turns out bigger while streaming); all of them together count against the ``hub_mb``
    budget (through :class:`BudgetedFS`). A refused or failed fetch leaves no partial file. The
    folder is registered with :data:`viewer.sources.keep.KEEP` (deleted after the disk TTL or
    past the disk budget)."""
    from viewer.sources.keep import KEEP

    dest = cache_dir(spec, getattr(fs, "reader", "env"))
    cap = int(max_file_mb * 1048576) if max_file_mb else 0
    wanted = [n for n in CAPTURE_FILES if n in files]
    for name in wanted:
        if cap and (files[name] or 0) > cap:
            raise HubError(f"{spec}: {name} is {files[name] / 1048576:.1f} MB, over the {max_file_mb:g} MB "
                           "limit (VIEWER_MAX_FILE_MB); not downloaded")
    dest.mkdir(parents=True, exist_ok=True)
    KEEP.add(dest)  # used now: its TTL starts again
    for name in wanted:
        target = dest / name
        if target.exists() and files[name] is not None and target.stat().st_size == files[name]:
            continue
        if progress:
            progress(f"fetching {spec.repo}/{(spec.path + '/' if spec.path else '') + name}")
        tmp = target.with_suffix(target.suffix + ".part")
        try:
            hub_call(spec, lambda n=name, t=tmp: _copy_capped(fs, f"{spec.base}/{n}", t, cap, spec))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(target)
    return dest


def _copy_capped(fs, path: str, target: Path, cap: int, spec: HubSpec) -> None:
    n = 0
    with fs.open(path, "rb") as fin, open(target, "wb") as fout:
        while chunk := fin.read(1 << 20):
            n += len(chunk)
            if cap and n > cap:
                raise HubError(f"{spec}: {Path(path).name} is over the {cap / 1048576:g} MB limit "
                               "(VIEWER_MAX_FILE_MB); not downloaded")
            fout.write(chunk)


def data_files(spec: HubSpec, rel_paths: list[str], sizes: dict[str, int | None], is_file: bool) -> list[DataFile]:
    return [DataFile(spec.base if is_file else f"{spec.base}/{rel}", rel, data_kind(rel) or "jsonl",
                     size=sizes.get(rel)) for rel in rel_paths]
