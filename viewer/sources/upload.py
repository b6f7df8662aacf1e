"""Safe intake of user input: typed paths confined to ``data_root``, uploads size-limited.

:func:`resolve_user_path` turns a path typed in the UI into a real path inside
``Settings.data_root`` (symlinks resolved first, so a link cannot escape).
:func:`intake_upload` accepts an uploaded file or zip and places it in a target folder:
zip entries with absolute paths, ``..`` components or symlinks are refused, and the
archive is refused whole when its total uncompressed size is over the limit (checked
from the directory *and* enforced while streaming, since headers can lie). Nothing is
ever written outside the target folder. No parsing happens here.
"""
from __future__ import annotations


import os
import secrets
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator

from viewer.budgets import env_name, limits
from viewer.config import Settings
from viewer.rollout import Problem
from viewer.layout import RECORD_NAMES

__all__ = ["resolve_user_path", "hidden_from_visitors", "visible_walk", "intake_upload", "intake_files", "Intake",
           "UploadRefused", "MAX_ZIP_ENTRIES"]

MAX_ZIP_ENTRIES = 10_000  # kept for callers; the limit in force is the upload_files budget
_CHUNK = 1 << 20


class UploadRefused(ValueError):
    """The upload as a whole was refused (too big, not a usable archive)."""


@dataclass
class Intake:
    """Where the accepted upload lies (``root``: a folder or file to load) and what was refused."""

    root: Path
    files: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


UPLOAD_PREFIX = "ri-upload-"  # the temporary folder of each upload (viewer/ui/browse.py)


def resolve_user_path(text: str, settings: Settings | None = None) -> Path:
    """A typed path -> an existing path inside ``data_root``; ValueError with the reason otherwise.

    Relative paths are taken relative to ``data_root``.
    """
    settings = settings or Settings()
    raw = (text or "").strip()
    if not raw:
        raise ValueError("no path given")
    if "\x00" in raw:
        raise ValueError("path contains a NUL character")
    root = Path(settings.data_root).expanduser().resolve()
    p = Path(raw).expanduser()
    if not p.is_absolute():
        p = root / p
    resolved = p.resolve()
    where = "" if settings.public_mode() else f" {root}"  # a public app's layout is not shown (shown.py)
    if not resolved.is_relative_to(root):
        raise ValueError(f"{raw}: outside the allowed data folder{where} (data_root / VIEWER_DATA_ROOT); refused")
    # Other visitors' uploads and (on a public app) captures are theirs: never by typed path or link
    if hidden_from_visitors(resolved, settings):
        if any(part.startswith(UPLOAD_PREFIX) for part in resolved.parts):
            raise ValueError(f"{raw}: an uploaded file is only visible to the session that uploaded it; refused")
        raise ValueError(f"{raw}: captures on a public app open through their owner's job link; refused")
    if not resolved.exists():
        raise ValueError(f"{raw}: no such file or folder under the data folder{where}")
    return resolved


def hidden_from_visitors(path: str | Path, settings: Settings | None = None) -> bool:
    """A folder no visitor may read as data, wherever it lies: an upload's folder (its session's own)
    and, on a public app, the capture output root (captures open through their owner's job link).
    :func:`resolve_user_path` refuses such a path when typed; :func:`visible_walk` keeps folder walks (a
    folder of data files, a folder of captures) out of them when the capture root lies inside the
    data root, where a walk of the data root would otherwise read visitors' captures as rows."""
    settings = settings or Settings()
    p = Path(path).resolve()
    if any(part.startswith(UPLOAD_PREFIX) for part in p.parts):
        return True
    return settings.public_mode() and p.is_relative_to(Path(settings.capture_out_root).expanduser().resolve())


def visible_walk(top: str | Path, settings: Settings | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` (top-down, links not followed, a folder it cannot list skipped) without the subfolders
    no visitor may read as data (:func:`hidden_from_visitors`). A walk that starts inside such a folder (a
    session opening its own upload, an owner's capture) is theirs already: only what lies below ``top`` and
    is hidden where ``top`` is not goes. A caller may edit ``dirs`` in place, as with ``os.walk``.

    Each folder is decided without resolving its path (~140 us a folder, and a SWE-agent or mini-swe-agent
    run holds one folder per instance): a walk that follows no link enters only real folders, so a
    subfolder's resolved path is its parent's and its name; an ancestor that was hidden was never entered,
    and ``top`` is not hidden; so a subfolder is hidden exactly when its name starts with
    :data:`UPLOAD_PREFIX` or, on a public app, it is the capture root itself. A link to a folder (listed in
    ``dirs``, never entered) is resolved and decided by :func:`hidden_from_visitors`."""
    settings = settings or Settings()
    base = str(top)
    if hidden_from_visitors(base, settings):
        yield from os.walk(base)
        return
    captures = str(Path(settings.capture_out_root).expanduser().resolve()) if settings.public_mode() else None
    yield from _walk(base, os.path.realpath(base), captures, settings)  # (realpath: what Path.resolve gives)


def _walk(here: str, real: str, captures: str | None, settings: Settings
          ) -> Iterator[tuple[str, list[str], list[str]]]:
    """The folder ``here`` (resolved: ``real``) of :func:`visible_walk` and those below it. Whether an entry
    is a link comes from the listing itself, where ``os.walk`` asks the os again for each subfolder."""
    dirs: list[str] = []
    names: list[str] = []
    links: set[str] = set()
    try:
        with os.scandir(here) as entries:
            for e in entries:
                try:
                    is_dir = e.is_dir()  # (follows a link, as os.walk lists it)
                except OSError:
                    is_dir = False
                if not is_dir:
                    names.append(e.name)
                    continue
                dirs.append(e.name)
                try:
                    if e.is_symlink():
                        links.add(e.name)
                except OSError:
                    pass
    except OSError:  # (os.walk with no onerror: the folder is skipped)
        return
    dirs[:] = [d for d in dirs if not (hidden_from_visitors(os.path.join(here, d), settings) if d in links else
                                       d.startswith(UPLOAD_PREFIX) or os.path.join(real, d) == captures)]
    listed = set(dirs)
    yield here, dirs, names
    for d in dirs:  # (after the caller's edits)
        path = os.path.join(here, d)
        if d in links or (d not in listed and os.path.islink(path)):  # (a name the caller added: asked)
            continue
        yield from _walk(path, os.path.join(real, d), captures, settings)


def intake_upload(path: str | Path, dest: str | Path, settings: Settings | None = None) -> Intake:
    """Place an uploaded file (or the safe entries of an uploaded zip) under ``dest``.

    Raises UploadRefused when the upload is over ``max_upload_mb``, a zip's total
    uncompressed size is over ``max_file_mb`` (zip bomb), or the zip is unreadable.
    Refused zip entries are reported as Problems; the rest is extracted.
    """
    settings = settings or Settings()
    src, dest = Path(path), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    size = src.stat().st_size
    limit = settings.max_upload_mb * 1024 * 1024
    if size > limit:
        raise UploadRefused(f"{src.name}: upload is {size / 1048576:.1f} MB, over the "
                            f"{settings.max_upload_mb} MB limit (max_upload_mb / VIEWER_MAX_UPLOAD_MB)")
    whole = src.name.lower().endswith(".eval")  # an Inspect AI log: a zip the row reader opens as one file
    if whole or not zipfile.is_zipfile(src):
        with open(src, "rb") as fh:
            if not whole and fh.read(4) == b"PK\x03\x04":  # a zip's first entry header, but no readable directory
                raise UploadRefused(f"{src.name}: a zip archive that is truncated or corrupt (its central "
                                    "directory is missing); nothing was extracted — upload it again")
        name = _safe_name(src.name) or "upload.json"
        if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_PART:
            raise UploadRefused(f"{name[:40]}…: a file name over {MAX_NAME_PART} bytes; rename it and upload again")
        target = dest / name
        if target.exists():
            raise UploadRefused(f"{name}: two uploaded files have this name; only the first was kept")
        try:
            shutil.copyfile(src, target)
        except OSError as e:
            target.unlink(missing_ok=True)
            raise UploadRefused(f"{name}: cannot store this upload ({e.strerror or e})") from None
        return Intake(target, [target])
    return _extract_zip(src, dest.resolve(), settings)


def intake_files(paths: list[str | Path], dest: str | Path, settings: Settings | None = None
                 ) -> tuple[Path | None, list[str]]:
    """A visitor's whole upload (one or several files, zips included) placed under ``dest``:
    (what to open, or None when nothing was usable; notes for the status line).

    The upload may hold at most the ``upload_files`` budget of files (each file within
    ``max_upload_mb``; on a public app all of them together too); one file (or one zip) opens
    as itself, several form one capture folder."""
    settings = settings or Settings()
    paths = [p for p in (paths or []) if p]
    lim = limits(settings.public_mode())
    if len(paths) > lim.upload_files:
        raise UploadRefused(f"{len(paths):,} files in one upload, over the {lim.upload_files:,.0f} files an upload "
                            f"may hold (budget upload_files, {env_name('upload_files')}); upload a zip or fewer files")
    if settings.public_mode():  # a public visitor's whole upload, not just each file, within the limit
        total = sum(Path(p).stat().st_size for p in paths if Path(p).is_file())
        if total > settings.max_upload_mb * 1048576:
            raise UploadRefused(f"{len(paths)} files of {total / 1048576:.1f} MB in all, over the "
                                f"{settings.max_upload_mb} MB an upload may hold on this public app")
    notes: list[str] = []
    roots: list[Path] = []
    for f in paths:
        try:
            got = intake_upload(f, dest, settings)
        except UploadRefused as e:
            notes.append(str(e))
            continue
        except OSError as e:  # the uploaded file vanished or cannot be read: say so, keep the rest
            notes.append(f"{Path(f).name}: cannot read this upload ({e.strerror or e})")
            continue
        roots.append(got.root)
        notes += [str(p) for p in got.problems]
    if not roots:
        return None, notes
    return (roots[0] if len(roots) == 1 else Path(dest)), notes


def _safe_name(name: str) -> str | None:
    """A plain file name (no directories) or None."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return base if base not in ("", ".", "..") else None


# A zip entry's name: each part at most 255 bytes (the file system's own limit, so a long name is a
# refusal, not an OSError mid-extraction), the whole at most 1024, at most 32 folders deep (a
# capture is two or three deep; 1,500 levels made pathlib recurse past Python's limit).
MAX_NAME_PART = 255
MAX_NAME = 1024
MAX_DEPTH = 32


def _entry_refusal(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if "\x00" in name:
        return "has a NUL character in its name"
    norm = name.replace("\\", "/")
    if len(norm.encode("utf-8", "surrogateescape")) > MAX_NAME:
        return f"has a name over {MAX_NAME} bytes"
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return "has an absolute path"
    parts = [x for x in norm.split("/") if x not in ("", ".")]
    if ".." in parts:
        return "has a '..' component"
    if len(parts) > MAX_DEPTH:
        return f"is {len(parts)} folders deep, over the {MAX_DEPTH} limit"
    if any(len(x.encode("utf-8", "surrogateescape")) > MAX_NAME_PART for x in parts):
        return f"has a file or folder name over {MAX_NAME_PART} bytes"
    return None


def _extract_zip(src: Path, dest: Path, settings: Settings) -> Intake:
    """Extract into a fresh staging folder inside ``dest``, then move its top level into ``dest``:
    a refusal part-way (or any error) removes the staging folder, so nothing partial is left."""
    stage = dest / f".zip-{secrets.token_hex(8)}"  # inside the upload's own (kept) folder: no temp folder
    stage.mkdir()
    try:
        problems, written = _extract_into(src, stage, settings)
        moved: list[Path] = []
        for child in sorted(stage.iterdir()):
            target = dest / child.name
            if target.exists() or target.is_symlink():  # an earlier file of the same upload
                problems.append(Problem(src.name, child.name, "clashes with another uploaded file of the same "
                                                              "name; refused"))
                continue
            child.rename(target)
            moved.append(child)
        files = [dest / p.relative_to(stage) for p in written if any(p.is_relative_to(m) for m in moved)]
    except UploadRefused:
        raise
    except (OSError, RecursionError, RuntimeError, ValueError, zipfile.BadZipFile) as e:
        raise UploadRefused(f"{src.name}: cannot extract this archive ({type(e).__name__}: {e}); nothing was "
                            "kept") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return Intake(_capture_root(dest, files), files, problems)


def _extract_into(src: Path, dest: Path, settings: Settings) -> tuple[list[Problem], list[Path]]:
    lim = limits(settings.public_mode())
    # what a zip may decompress to: the file-size cap, and the decompressed_mb budget of one open
    cap_mb = min([x for x in (settings.max_file_mb, lim.decompressed_mb) if x] or [settings.max_file_mb])
    why_cap = "max_file_mb" if cap_mb == settings.max_file_mb else f"budget decompressed_mb, {env_name('decompressed_mb')}"
    cap = int(cap_mb * 1024 * 1024)
    problems: list[Problem] = []
    written: list[Path] = []
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError) as e:
        raise UploadRefused(f"{src.name}: not a readable zip archive ({e})") from None
    with zf:
        infos = zf.infolist()
        most = int(lim.upload_files)
        if len(infos) > most:
            raise UploadRefused(f"{src.name}: {len(infos):,} entries, over the {most:,} files an upload may hold "
                                f"(budget upload_files, {env_name('upload_files')})")
        declared = sum(i.file_size for i in infos)
        if declared > cap:
            raise UploadRefused(f"{src.name}: uncompressed size {declared / 1048576:.1f} MB is over the "
                                f"{cap_mb:g} MB limit ({why_cap}); refused as a possible zip bomb")
        total = 0
        taken: set[Path] = set()  # files written
        folders: set[Path] = set()  # folders holding them
        for info in infos:
            if info.is_dir():
                continue
            why = _entry_refusal(info)
            target = dest.joinpath(*[x for x in info.filename.replace("\\", "/").split("/") if x not in ("", ".")]) \
                if why is None else None
            if target is not None and not target.resolve().is_relative_to(dest):
                why = "would be written outside the target folder"
            if why is None and (target in folders or target in taken or any(p in taken for p in target.parents)):
                # "a" and "a/b": one name as a file and as a folder (or twice); the first one stays
                why = "names a file that is also a folder (or another entry) in this archive"
            if why is not None:
                problems.append(Problem(src.name, info.filename, f"zip entry {why}; refused"))
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                total = _copy_capped(zf, info, target, total, cap)
            except UploadRefused:
                raise
            except (zipfile.BadZipFile, OSError, RuntimeError, ValueError) as e:
                if target.is_file():
                    target.unlink(missing_ok=True)
                problems.append(Problem(src.name, info.filename, f"cannot extract: {e}"))
                continue
            written.append(target)
            taken.add(target)
            folders.update(target.parents)
    return problems, written


def _copy_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, total: int, cap: int) -> int:
    """Stream one entry, stopping if it exceeds its declared size or the total cap."""
    n = 0
    with zf.open(info) as fin, open(target, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            n += len(chunk)
            if n > info.file_size or total + n > cap:
                fout.close()
                raise UploadRefused(f"{info.filename}: decompresses past its declared size or the "
                                    f"{cap // 1048576} MB limit; refused as a possible zip bomb")
            fout.write(chunk)
    return total + n


def _capture_root(dest: Path, files: list[Path]) -> Path:
    """The shallowest folder holding a trace/turns file; else the only file; else ``dest``."""
    hits = sorted((p for p in files if p.name in RECORD_NAMES), key=lambda p: (len(p.parts), str(p)))
    if hits:
        return hits[0].parent
    if len(files) == 1:
        return files[0]
    return dest
