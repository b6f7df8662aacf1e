"""Issue 36, finding 2: uploaded tokenizers inside the cache budget, and identical ones loaded once.

Before: each uploaded capture that shipped its ``tokenizer/`` loaded its own tokenizer and token table
(~17 MB each for SmolLM2's), held by the cache entry of its rollout but weighed as the rollout alone: 30
uploads, +506 MB, whatever ``cache_mb`` said. Now a tokenizer loaded from a folder is a *share* of the
store's byte-bounded cache (viewer/memo.py): counted once, with its token table, however many rollouts
are shown with it, and let go with the last of them; folders holding the same files (same sha256)
share one loaded tokenizer, so a typed override that names the same files reuses it.

On a real public app on loopback, driven as the page drives it (``attack_kit.Visitor``: Gradio's upload
route, then the ``open_upload`` event), in this process, so the tokenizers alive are counted exactly
(``gc``), not guessed from RSS.
"""
from __future__ import annotations

import gc
import io
import json
import os
import shutil
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from attack_kit import Visitor, launch_in_process
from viewer.config import SAMPLE_DIR, Settings

pytest.importorskip("transformers")

SMOL = SAMPLE_DIR / "smollm2" / "tokenizer"
CACHE_MB = 64  # room for about three SmolLM2 tokenizers with their tables (~19 MB each, counted)
UPLOADS = 8


def _tokenizers() -> list:
    """Every tokenizer object alive in this process (the app's server runs in it)."""
    from transformers import PreTrainedTokenizerBase

    gc.collect()
    return [o for o in gc.get_objects() if issubclass(type(o), PreTrainedTokenizerBase)]  # type(): no proxy asked


def _store():
    from viewer.ui.store import RolloutStore

    stores = [o for o in gc.get_objects() if type(o) is RolloutStore and o.settings.cache_mb == CACHE_MB]
    assert len(stores) == 1
    return stores[0]


def _capture_zip(variant: int | None) -> bytes:
    """qwen3-tiny's capture shipping SmolLM2's tokenizer/ (``variant``: its config made distinct, so the
    files differ the way an attacker's 30 uploads would)."""
    sample = SAMPLE_DIR / "qwen3-tiny"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("trace.json", "summary.json", "task.json", "turns.json"):
            zf.writestr(f"cap/{name}", (sample / name).read_bytes())
        zf.writestr("cap/tokenizer/tokenizer.json", (SMOL / "tokenizer.json").read_bytes())
        config = json.loads((SMOL / "tokenizer_config.json").read_text())
        if variant is not None:
            config["variant"] = variant
        zf.writestr("cap/tokenizer/tokenizer_config.json", json.dumps(config))
    return buf.getvalue()


@pytest.fixture(scope="module")
def app(tmp_path_factory):

    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    root = tmp_path_factory.mktemp("tok-root")
    settings = Settings(public=True, data_root=str(root), cache_mb=CACHE_MB,
                        capture_out_root=str(tmp_path_factory.mktemp("caps")))
    demo, server = launch_in_process(settings)
    yield SimpleNamespace(demo=demo, server=server)
    demo.close()


def _open_upload(app, v: Visitor, data: bytes) -> str:
    deps = app.server.config["dependencies"]
    i = next(k for k, d in enumerate(deps) if d.get("api_name") == "open_upload")
    up = v.upload("capture.zip", data)
    r = v.call(i, [[up], "", None] + [None] * (len(deps[i]["inputs"]) - 3))
    assert r.completed and r.success, r.text[-2000:]
    return r.text


def test_uploaded_tokenizers_stay_within_the_cache_budget(app):
    """The issue's attack: uploads that each ship their own tokenizer/. Before: one tokenizer alive per
    upload (8 here), outside cache_mb. Now: as many as the budget holds, each counted in it."""
    before = {id(t) for t in _tokenizers()}
    v = Visitor(app.server)
    for n in range(UPLOADS):
        text = _open_upload(app, v, _capture_zip(n))
        assert "Tokenizer from the capture folder" in text, text[-1500:]
    new = [t for t in _tokenizers() if id(t) not in before]
    # each is ~17 MB in RSS (issue 36), over 16 MB as counted: the budget holds three, plus the one being opened
    assert len(new) <= CACHE_MB // 16 + 1, f"{len(new)} uploaded tokenizers alive after {UPLOADS} uploads"
    store = _store()
    per = max(store.memo._shares.values(), key=lambda c: c[1])[1]  # one tokenizer with its table, as counted
    assert per > 16 << 20 and store.memo.bytes <= store.memo.max_bytes
    # every tokenizer that is alive is counted in the cache (the +1 above: the one being opened when it was full)
    counted = {k[1] for k in store.memo._shares}
    assert len([t for t in new if id(t) not in counted]) <= 1


def test_identical_tokenizer_files_load_once(app):
    """Six uploads shipping the same tokenizer files (in six folders): one tokenizer object for all of them."""
    before = {id(t) for t in _tokenizers()}
    v = Visitor(app.server)
    for _ in range(6):
        _open_upload(app, v, _capture_zip(None))
    new = [t for t in _tokenizers() if id(t) not in before]
    assert len(new) <= 1, f"{len(new)} tokenizers loaded for six uploads of the same files"


def test_an_override_naming_the_same_files_reuses_the_loaded_tokenizer(tmp_path):
    """Typed overrides that resolve to the same files (another spelling, another folder with a copy) get
    the tokenizer already loaded, counted once in the cache."""
    from viewer.ui.store import RolloutStore

    for name in ("tokA", "tokB"):
        shutil.copytree(SMOL, tmp_path / name)
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", tmp_path / "cap")
    store = RolloutStore(Settings(public=True, data_root=str(tmp_path), cache_mb=CACHE_MB))
    ops = [store.open(tmp_path / "cap", str(o)) for o in
           (tmp_path / "tokA", f"{tmp_path}/tokA/", tmp_path / "tokB", tmp_path / "tokB" / ".." / "tokB")]
    assert all(op.choice.source == "local-dir" for op in ops), [op.choice.message for op in ops]
    assert len({id(op.choice.tokenizer) for op in ops}) == 1
    assert len([k for k in store.memo._shares if k[0] == "tokenizer"]) == 1
    assert store.memo.bytes <= store.memo.max_bytes


def test_folder_digest_tells_different_files_apart(tmp_path):
    from viewer.tokenizer.loaded import folder_digest

    a, b, c = (shutil.copytree(SMOL, tmp_path / n) for n in "abc")
    (c / "tokenizer.model").write_bytes(b"another model file")  # a file the loader may read: part of the key
    assert folder_digest(a) == folder_digest(b) != folder_digest(c)
    (Path(b) / "tokenizer_config.json").write_text("{}")
    assert folder_digest(a) != folder_digest(b)


def test_a_parse_shown_with_two_tokenizers_is_counted_once(tmp_path):
    """Another tokenizer for an open source reuses its parse (finding 5); the cache counts that parse once."""
    from viewer.memo import approx_nbytes
    from viewer.ui.store import RolloutStore

    shutil.copytree(SMOL, tmp_path / "tok")
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", tmp_path / "cap")
    store = RolloutStore(Settings(public=True, data_root=str(tmp_path), cache_mb=CACHE_MB))
    a = store.open(tmp_path / "cap")
    b = store.open(tmp_path / "cap", str(tmp_path / "tok"))
    assert a.rollout is b.rollout and a.choice.tokenizer is not b.choice.tokenizer
    parse = [c for k, c in store.memo._shares.items() if k[0] == "parse"]
    assert parse == [[2, approx_nbytes(a.rollout)]]  # two entries, one parse, counted once


def test_a_forgotten_upload_takes_its_own_tokenizer_with_it(tmp_path):
    """The room attack's residue (tests/test_room_attack.py): after a session's uploads were deleted and
    forgotten (``RolloutStore.forget_under``), the tokenizers loaded from them stayed alive, ≈ 20 MB each:
    the store's own entry under the files' digest (its rollouts were gone, the tokenizer was not), and a
    keeper-less load of the same folder (a Certify or a scan of the upload: the last four such loads stay).
    Now both go; a tokenizer shipped by a folder that is not forgotten stays."""
    import weakref

    from viewer.tokenizer.loaded import load_tokenizer
    from viewer.ui.store import RolloutStore

    up, kept = tmp_path / "uploads" / "s1", tmp_path / "data"
    for folder, variant in ((up, "hostile"), (kept, "visitor")):
        cap = shutil.copytree(SAMPLE_DIR / "qwen3-tiny", folder / "cap")
        tok = shutil.copytree(SMOL, cap / "tokenizer")
        config = json.loads((tok / "tokenizer_config.json").read_text())
        config["variant"] = variant  # distinct files: distinct tokenizers
        (tok / "tokenizer_config.json").write_text(json.dumps(config))
    store = RolloutStore(Settings(public=True, data_root=str(tmp_path), cache_mb=CACHE_MB))
    hostile, visitor = store.open(up / "cap"), store.open(kept / "cap")
    assert hostile.choice.source == visitor.choice.source == "capture-folder", hostile.choice.message
    gone = weakref.ref(hostile.choice.tokenizer)
    stays = weakref.ref(visitor.choice.tokenizer)
    assert load_tokenizer(str(up / "cap" / "tokenizer")) is gone()  # a keeper-less load: the same object
    del hostile, visitor

    store.forget_under([tmp_path / "uploads"])
    gc.collect()
    assert gone() is None, "an upload's tokenizer outlived its deleted upload"
    assert stays() is not None and store.get(store.open(kept / "cap").key) is not None
