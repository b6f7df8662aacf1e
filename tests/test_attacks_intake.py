"""Attacks on what a visitor brings in (issue 19, points 4, 5, 7, 9), through the entry points a
visitor uses, in public mode, with planted secrets: an ``HF_TOKEN`` in the environment and a
``tokenizer.json`` planted outside the data root that must never be opened (a ``sys.addaudithook``
records every ``open``).

Each test failed on the code before the fix (checked against main e26e821)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from viewer.config import SAMPLE_DIR, Settings
from viewer.rollout import Problem
from viewer.sources import SourceError, SourceNotFound, open_dataset
from viewer.sources import hub
from viewer.sources.upload import Intake, UploadRefused, intake_upload

PLANTED_TOKEN = "hf_PLANTEDownerTOKEN0123456789"

# ---- an audit hook that records every file the process opens (installed once, filtered by a flag)
_OPENED: list[str] = []
_RECORDING = threading.Event()


def _audit(event: str, args) -> None:
    if event == "open" and _RECORDING.is_set() and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opened():
    _OPENED.clear()
    _RECORDING.set()
    try:
        yield _OPENED
    finally:
        _RECORDING.clear()


@pytest.fixture
def public(monkeypatch, tmp_path):
    """Public mode with the owner's token planted in the environment."""
    monkeypatch.setenv("VIEWER_PUBLIC", "1")
    monkeypatch.setenv("HF_TOKEN", PLANTED_TOKEN)
    monkeypatch.setenv("VIEWER_HUB_CACHE", str(tmp_path / "hubcache"))
    return Settings(public=True, data_root=str(tmp_path / "root"))


# ================================================================ 9. odd zips
def _zip_entries(path: Path, entries: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def _left_files(dest: Path) -> list[str]:
    return sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) if dest.exists() else []


@pytest.mark.parametrize("case", ["file-then-folder", "folder-then-file", "long-name", "deep"])
def test_odd_zip_entries_become_problems_not_crashes(tmp_path, public, case):
    trace = json.dumps([{"completion_token_ids": [1]}]).encode()
    entries = {
        "file-then-folder": [("run/trace.json", trace), ("a", b"x"), ("a/b", b"y")],
        "folder-then-file": [("run/trace.json", trace), ("a/b", b"y"), ("a", b"x")],
        "long-name": [("run/trace.json", trace), ("n" * 400 + ".json", b"x"), ("d" * 300 + "/x.json", b"x")],
        "deep": [("run/trace.json", trace), ("/".join(["d"] * 1500) + "/x.json", b"x")],
    }[case]
    z = _zip_entries(tmp_path / "odd.zip", entries)
    dest = tmp_path / "dest"
    out = intake_upload(z, dest, public)  # never FileExistsError / OSError / RecursionError
    assert isinstance(out, Intake)
    assert out.problems and all(isinstance(p, Problem) for p in out.problems)
    assert all(p.file == "odd.zip" for p in out.problems)
    # the good entry is there; of the clashing pair exactly what was accepted, nothing half-written
    left = _left_files(dest)
    assert "run/trace.json" in left
    accepted = {p.relative_to(dest.resolve()).as_posix() for p in out.files}
    assert set(left) == accepted
    refused = {p.where for p in out.problems}
    assert not (accepted & refused)


# ================================================================ 4. Hub reads as the visitor, never as the owner
VISITOR_A = "hf_visitorA_signin_token"


class FakeHub(DirFileSystem):
    """The Hub at the fsspec boundary, standing in for ``huggingface_hub.HfFileSystem`` where the
    app constructs it (same keyword ``token``): a folder laid out like the Hub
    (``datasets/OWNER/NAME``); ``owner/private*`` answers only to VISITOR_A's token (the Hub says
    "not found" to anyone else, as it does for a private repo). Records every token it is built with."""

    root: Path = Path(".")
    built: list = []
    cachable = False  # fsspec's instance cache would hand a later test an earlier test's folder

    def __init__(self, *args, token=None, **kw):
        super().__init__(path=str(FakeHub.root), fs=LocalFileSystem(), skip_instance_cache=True)
        self.token = token
        FakeHub.built.append(token)

    def _guard(self, path):
        if str(path).strip("/").startswith("datasets/owner/private") and self.token != VISITOR_A:
            raise FileNotFoundError(path)

    def info(self, path, **kw):
        self._guard(path)
        return super().info(path, **kw)

    def find(self, path, *a, **kw):
        self._guard(path)
        return super().find(path, *a, **kw)

    def open(self, path, *a, **kw):
        self._guard(path)
        return super().open(path, *a, **kw)

    def cat_file(self, path, *a, **kw):
        self._guard(path)
        return super().cat_file(path, *a, **kw)

    def get_file(self, rpath, lpath, *a, **kw):
        self._guard(rpath)
        return super().get_file(rpath, lpath, *a, **kw)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch, realdata):
    """The real code path down to the construction of HfFileSystem, which is this fake (the
    machine cannot reach the Hub; offline mode is lifted only because nothing leaves the process)."""
    import huggingface_hub
    from _row_fixtures import opencode_rows, write_jsonl

    root = tmp_path / "hub"
    for name in ("owner/private", "someone/public"):
        write_jsonl(opencode_rows(), root / "datasets" / name / "train.jsonl")
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "datasets" / "owner" / "private-capture")
    FakeHub.root, FakeHub.built = root, []
    monkeypatch.setattr(huggingface_hub, "HfFileSystem", FakeHub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    yield root


def _store(settings):
    from viewer.ui.store import RolloutStore

    return RolloutStore(settings)


def test_public_hub_reads_never_use_the_owners_token(fake_hub, public):
    from viewer.ui.opening import open_spec

    # an anonymous visitor's deep link: no token at all (False: huggingface_hub must not fall back to HF_TOKEN)
    op = open_spec(_store(public), public, "hf://datasets/someone/public", 1)
    assert op.rollout.turns
    assert FakeHub.built and all(t is False for t in FakeHub.built)
    # ... and the owner's private dataset is out of reach for them
    with pytest.raises(SourceNotFound, match="not found"):
        open_spec(_store(public), public, "hf://datasets/owner/private", 1)
    assert PLANTED_TOKEN not in [str(t) for t in FakeHub.built]
    # a signed-in visitor reads with their own token (and so opens their private dataset)
    FakeHub.built.clear()
    op = open_spec(_store(public), public, "hf://datasets/owner/private", 1, hub_token=VISITOR_A)
    assert op.rollout.turns and set(FakeHub.built) == {VISITOR_A}


def test_local_hub_reads_use_hf_token(fake_hub, monkeypatch, tmp_path):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("VIEWER_PUBLIC", raising=False)
    monkeypatch.setenv("HF_TOKEN", PLANTED_TOKEN)
    src = open_dataset("hf://datasets/someone/public", Settings())
    assert src.rollout(1).turns and set(FakeHub.built) == {PLANTED_TOKEN}


def test_private_hub_rows_and_captures_are_not_shared_between_visitors(fake_hub, public):
    """Visitor A opens their private dataset (and a private capture, fetched to disk); visitor B,
    anonymous, opens the same links next: the shared rollout cache and the Hub download folder
    must not hand A's data to B."""
    from viewer.ui.opening import open_spec

    store = _store(public)
    for spec in ("hf://datasets/owner/private", "hf://datasets/owner/private-capture"):
        a = open_spec(store, public, spec, 1 if spec.endswith("private") else None, hub_token=VISITOR_A)
        assert a.rollout.turns
        with pytest.raises(SourceNotFound):
            open_spec(store, public, spec, 1 if spec.endswith("private") else None)
        with pytest.raises(SourceNotFound):
            open_spec(store, public, spec, 1 if spec.endswith("private") else None, hub_token="hf_someone_else")


# ================================================================ 7. tokenizer files: no oracle for server files
# A tokenizer folder that is loaded in the tests below (a capture's own, a local model folder): SmolLM2's
# real files (1.5 MB; Qwen3's 16 MB took a second to zip and another to load from each new path)
SMOL_TOKENIZER = SAMPLE_DIR / "smollm2" / "tokenizer"


def _planted_tokenizer(tmp_path: Path, files: Path | None = None) -> Path:
    """A real tokenizer folder outside the data root (the Qwen3 files unless ``files``), standing for
    any server folder that holds a tokenizer.json: a visitor's capture must never make the app open it."""
    from viewer.tokenizer import qwen3_dir

    planted = tmp_path / "server-only" / "model"
    shutil.copytree(files or qwen3_dir(), planted)
    return planted


def _capture_zip(tmp_path: Path, *, summary_extra: dict, model: str | None = None,
                 with_tokenizer: bool = False) -> Path:
    sample = SAMPLE_DIR / "qwen3-tiny"
    trace = json.loads((sample / "trace.json").read_text())
    summary = json.loads((sample / "summary.json").read_text())
    summary.update(summary_extra)
    if model is not None:
        summary["model"] = model
        for rec in trace:
            rec["request"]["model"] = model
    z = tmp_path / "capture.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cap/trace.json", json.dumps(trace))
        zf.writestr("cap/summary.json", json.dumps(summary))
        for name in ("task.json", "turns.json"):
            zf.writestr(f"cap/{name}", (sample / name).read_text())
        if with_tokenizer:  # the capture's own tokenizer folder
            for f in sorted(SMOL_TOKENIZER.iterdir()):
                if f.is_file():
                    zf.write(f, f"cap/tokenizer/{f.name}")
    return z


def _open_upload(z: Path, settings: Settings, tmp_path: Path):
    """What the upload button does: intake, then open in the store (tokenizer chosen there)."""
    from viewer.sources.upload import intake_files

    dest = tmp_path / "ri-upload-test"
    root, notes = intake_files([str(z)], dest, settings)
    assert root is not None, notes
    return _store(settings).open(root)


def test_capture_tokenizer_names_cannot_probe_server_files(tmp_path, public, opened):
    planted = _planted_tokenizer(tmp_path)
    names = {"tokenizer.json": "0" * 64, "../../../server-only/model/tokenizer.json": "0" * 64,
             str(planted / "tokenizer.json"): "0" * 64, str(planted / "vocab.json"): "0" * 64}
    z = _capture_zip(tmp_path, summary_extra={"tokenizer": {"source": "x", "folder": "tokenizer", "files": names}},
                     with_tokenizer=True)
    opened.clear()  # from here on: the visitor's upload and its opening
    op = _open_upload(z, public, tmp_path)
    assert op.choice.source == "capture-folder"
    assert not [p for p in opened if Path(p).resolve().is_relative_to(planted.parent)], "a planted file was opened"
    assert "not a plain file name" in op.choice.message


def test_trace_model_naming_a_server_folder_does_not_load_it(tmp_path, public, opened):
    planted = _planted_tokenizer(tmp_path)
    z = _capture_zip(tmp_path, summary_extra={}, model=str(planted))
    opened.clear()  # from here on: the visitor's upload and its opening
    op = _open_upload(z, public, tmp_path)
    assert op.choice.source != "local-dir" and op.choice.name != str(planted)
    assert not [p for p in opened if Path(p).resolve().is_relative_to(planted.parent)], "a planted file was opened"


def test_local_mode_keeps_model_folders(tmp_path, monkeypatch):
    """What a local user relies on stays: a trace's model naming a local model folder loads it."""
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("VIEWER_PUBLIC", raising=False)
    planted = _planted_tokenizer(tmp_path, SMOL_TOKENIZER)
    z = _capture_zip(tmp_path, summary_extra={}, model=str(planted))
    op = _open_upload(z, Settings(), tmp_path)
    assert op.choice.source == "local-dir" and op.choice.name == str(planted.resolve())


# ================================================================ 5. budgets: Hub bytes, scans, uploads, disk
def _big_jsonl(path: Path, rows: int) -> Path:
    from _row_fixtures import opencode_rows

    base = opencode_rows()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i in range(rows):
            fh.write(json.dumps(dict(base[i % len(base)], pad="x" * 20_000, session_id=f"s{i}")) + "\n")
    return path


def test_hub_bytes_per_source_are_budgeted(fake_hub, public, monkeypatch):
    """An anonymous deep link to a row far into a big Hub JSONL stops at the hub_mb budget."""
    from viewer.budgets import BudgetExceeded
    from viewer.ui.opening import open_spec

    _big_jsonl(fake_hub / "datasets" / "someone" / "big" / "train.jsonl", 150)  # ~3 MB
    monkeypatch.setenv("VIEWER_BUDGET_HUB_MB", "1")
    with pytest.raises((BudgetExceeded, hub.HubError, SourceError), match="hub_mb|1 MB budget"):
        open_spec(_store(public), public, "hf://datasets/someone/big", 140)


def test_hub_jsonl_scan_and_count_stay_within_max_file_mb(fake_hub, public):
    _big_jsonl(fake_hub / "datasets" / "someone" / "big" / "train.jsonl", 150)  # ~3 MB
    small = Settings(public=True, data_root=public.data_root, max_file_mb=1)
    with pytest.raises(SourceError, match="VIEWER_MAX_FILE_MB"):
        src = open_dataset("hf://datasets/someone/big", small)
        len(src.dataset)  # counting the rows scans the whole file


def test_hub_capture_fetch_is_capped_and_leaves_nothing(fake_hub, public, tmp_path):
    cap = fake_hub / "datasets" / "someone" / "bigcap"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", cap)
    (cap / "trace.json").write_text(json.dumps([{"pad": "x" * (2 << 20)}]))  # 2 MB
    small = Settings(public=True, data_root=public.data_root, max_file_mb=1)
    with pytest.raises(SourceError, match="over the 1 MB limit"):
        open_dataset("hf://datasets/someone/bigcap", small)
    left = [p for p in (tmp_path / "hubcache").rglob("*") if p.is_file()] if (tmp_path / "hubcache").exists() else []
    assert not [p for p in left if p.name.startswith("trace.json")]


def test_multi_file_upload_counts_files(tmp_path, public, monkeypatch):
    from viewer.sources.upload import intake_files

    files = []
    for i in range(65):  # the public default of upload_files is 64
        f = tmp_path / "many" / f"f{i}.json"
        f.parent.mkdir(exist_ok=True)
        f.write_text("[]")
        files.append(str(f))
    with pytest.raises(UploadRefused, match="upload_files"):
        intake_files(files, tmp_path / "dest", public)
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())


def test_row_browser_sort_scans_at_most_rows_scanned(tmp_path, public, monkeypatch, realdata):
    from viewer.budgets import BudgetExceeded
    from viewer.row_browser import browse_page

    from _row_fixtures import harbor_rows, write_jsonl

    root = Path(public.data_root)
    # Harbor rows: no (key, version) pair, so no newest-per-key scan before the first page
    # (opencode exports have one, and it is budgeted too: tests/test_budgets.py)
    write_jsonl(harbor_rows() * 12, root / "rows" / "train.jsonl")
    monkeypatch.setenv("VIEWER_BUDGET_ROWS_SCANNED", "5")
    src = open_dataset(str(root / "rows" / "train.jsonl"), public)
    assert browse_page(src, 0, 3).rows  # a page without sort reads just its rows
    with pytest.raises(BudgetExceeded, match="rows_scanned|5 rows budget"):
        browse_page(src, 0, 3, sort="turns")


def test_disk_ttl_and_cap_delete_oldest_first(tmp_path, monkeypatch):
    """Folders kept for visitors go after disk_ttl_s unused, and oldest first past disk_mb."""
    from viewer.budgets import limits
    from viewer.sources.keep import Keep

    keep = Keep()
    folders = []
    for i in range(3):
        d = tmp_path / f"ri-upload-{i}"
        d.mkdir()
        (d / "trace.json").write_bytes(b"x" * (1 << 20))  # 1 MB each
        folders.append(keep.add(d, session=f"s{i}"))
    lim = limits(True, {"VIEWER_BUDGET_DISK_MB": "2", "VIEWER_BUDGET_DISK_TTL_S": "60"})
    import time

    assert keep.sweep(lim) == [folders[0]]  # 3 MB over a 2 MB budget: the oldest goes
    assert not folders[0].exists() and folders[1].exists()
    assert set(keep.sweep(lim, now=time.time() + 120)) == set(folders[1:])  # unused past the TTL
    assert not any(p.exists() for p in folders)


# ================================================================ 5. the app: session end, drift scan of "every row"
@pytest.fixture(scope="module")
def public_app(tmp_path_factory):
    """The real app in public mode on loopback, launched as app.py does."""
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    root = tmp_path_factory.mktemp("public-root")
    for i in range(4):
        shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "caps" / f"c{i}")
    settings = Settings(public=True, data_root=str(root), capture_out_root=str(tmp_path_factory.mktemp("caps")))
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield demo, url.rstrip("/")
    demo.close()


def _wait(cond, timeout=60.0):
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_upload_folder_is_deleted_when_the_session_ends(public_app, tmp_path):
    import httpx
    from gradio_client import Client, handle_file

    from viewer.sources.keep import KEEP

    demo, url = public_app
    assert demo.delete_cache == (900, 3600)  # Gradio's own copies of uploads go after the public TTL
    client = Client(url + "/", verbose=False)
    client.predict([handle_file(str(SAMPLE_DIR / "qwen3-tiny" / "trace.json"))], "", api_name="/open_upload")
    mine = KEEP.kept(client.session_hash)  # the upload folder, and Gradio's copy of what was posted
    ups = [p for p in mine if p.name.startswith("ri-upload-")]
    assert len(ups) == 1 and (ups[0] / "trace.json").is_file() and len(mine) == 2, mine
    # the browser's heartbeat stream for this session; closing it is what closing the tab does
    with httpx.Client(timeout=30) as http:
        with http.stream("GET", f"{url}/gradio_api/heartbeat/{client.session_hash}") as resp:
            next(resp.iter_bytes())
    assert _wait(lambda: not any(p.exists() for p in mine)), "the upload folder outlived its session"
    assert KEEP.kept(client.session_hash) == []


def test_public_drift_scan_of_every_row_is_capped(public_app, monkeypatch):
    from gradio_client import Client

    _demo, url = public_app
    monkeypatch.setenv("VIEWER_BUDGET_ROWS_SCANNED", "2")
    client = Client(url + "/", verbose=False)
    # a blank row limit (None; the field's minimum is 1, so 0 cannot be sent) meant "every row"
    out = client.predict("folder of captures", "caps", "", None, None, "local", api_name="/drift_scan")
    summary, table = out[0], out[1]  # (the scan id is a State: not part of the API)
    rollouts = {row[0] for row in table["data"]}
    assert len(rollouts) == 2, rollouts
    assert "rows_scanned" in summary


def test_public_multi_file_upload_bytes_are_counted_together(tmp_path, public):
    from viewer.sources.upload import intake_files

    small = Settings(public=True, data_root=public.data_root, max_upload_mb=1)
    files = []
    for i in range(3):  # each under the 1 MB limit, 1.5 MB together
        f = tmp_path / "parts" / f"p{i}.json"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(b" " * (512 * 1024))
        files.append(f)
    with pytest.raises(UploadRefused, match="in all, over the 1 MB"):
        intake_files(files, tmp_path / "dest", small)


def test_public_tokenizer_fetches_from_the_hub_use_no_token(public, monkeypatch):
    """A model name a visitor typed (a capture's tokenizer) or a tokenizer override is fetched from
    the Hub as nobody: huggingface_hub's real snapshot_download is replaced only to record its token."""
    import huggingface_hub

    from viewer.capture import tokfiles
    from viewer.tokenizer.choice import resolve_tokenizer

    seen = []

    def snapshot_download(repo_id, *a, **kw):
        seen.append(kw.get("token", "not passed: HF_TOKEN"))
        raise FileNotFoundError(repo_id)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    tokfiles.locate("owner/gated-model", online=True)
    resolve_tokenizer(None, "owner/gated-model", online=True, public=True, data_root=public.data_root)
    assert seen == [False, False]
