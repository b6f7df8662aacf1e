"""The one disk keeper (issue 36, findings 3 and 4): every file the app writes for a visitor, and
everything posted to Gradio's own upload route, is the keeper's: counted in ``disk_mb`` (and a
client's ``disk_client_mb``), deleted when its session ends or after ``disk_ttl_s``.

The app is the real one, public, on loopback, launched as app.py does, with its own temp folder and
Gradio cache (so what is left behind can be listed). Each attack test failed on the code before
(checked: the old ``viewer/ui`` and ``viewer/sources/keep.py`` swapped in)."""
from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from viewer.config import REPO_ROOT, SAMPLE_DIR, Settings
from viewer.sources.keep import KEEP, Keep, folder_bytes

DOWNLOAD_NAMES = re.compile(r"(notes\.json|deck\.json|.*-turn\d+-.*\.json)$")


def test_no_temp_folder_outside_the_keeper():
    """One mechanism: the UI and the readers make no temp folder of their own (three did: notes, deck,
    repro), so nothing they write can escape the keeper's session end, TTL and disk budget."""
    offenders = [str(p.relative_to(REPO_ROOT)) for d in ("viewer/ui", "viewer/sources")
                 for p in sorted((REPO_ROOT / d).rglob("*.py"))
                 if "mkdtemp" in p.read_text() and p.name != "keep.py"]
    assert offenders == []


def test_the_gate_names_gradios_own_cache_folder():
    from gradio.utils import get_upload_folder

    from viewer.ui.upload_gate import gradio_cache

    assert gradio_cache() == Path(get_upload_folder()).resolve()


def test_client_key_trusts_forwarded_for_only_behind_a_proxy():
    from viewer.sources.keep import client_key

    assert client_key("10.0.0.5", "8.8.8.8") == "10.0.0.5"  # no proxy: the header is the client's own text
    assert client_key("10.0.0.5", "1.2.3.4, 8.8.8.8, 10.0.0.1", behind_proxy=True) == "8.8.8.8"
    assert client_key("10.0.0.5", "garbage", behind_proxy=True) == "10.0.0.5"


# ---------------------------------------------------------------- the app, public, on loopback
@pytest.fixture(scope="module")
def public_app(tmp_path_factory):
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    tmp = tmp_path_factory.mktemp("keep-tmp")
    cache = tmp_path_factory.mktemp("keep-gradio")
    old_tmp, old_cache = tempfile.tempdir, os.environ.get("GRADIO_TEMP_DIR")
    tempfile.tempdir, os.environ["GRADIO_TEMP_DIR"] = str(tmp), str(cache)
    root = tmp_path_factory.mktemp("keep-root")
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "cap")
    settings = Settings(public=True, data_root=str(root), capture_out_root=str(tmp_path_factory.mktemp("caps")))
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    try:
        yield url.rstrip("/"), tmp, cache
    finally:
        demo.close()
        tempfile.tempdir = old_tmp
        if old_cache is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = old_cache


def _wait(cond, timeout=60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _left(*folders: Path, pattern=DOWNLOAD_NAMES) -> list[str]:
    """Download files under ``folders`` (os.walk: a folder the keeper deletes meanwhile is no error)."""
    return sorted(os.path.join(r, n) for d in folders for r, _, names in os.walk(d) for n in names
                  if pattern.search(n))


def _client(url: str, tmp_path: Path):
    from gradio_client import Client

    return Client(url + "/", verbose=False, download_files=str(tmp_path / "client"), httpx_kwargs={"timeout": 60})


def _downloads(c) -> None:
    """Open the sample's tool turn, then Download notes.json, Add this view to the deck, Export repro JSON."""
    from viewer.sources import load_source

    turn = next(t for t in load_source(SAMPLE_DIR / "qwen3-tiny").agent_turns if t.tool_names)
    c.predict("qwen3-tiny", "", api_name="/open_sample")
    c.predict(turn.index, api_name="/select_turn")
    c.predict(api_name="/download_notes")
    c.predict("", "mask", api_name="/deck_add_view")
    assert c.predict(api_name="/drift_repro")  # the sample's tool turn has drift cases


def _end_session(url: str, session: str) -> None:
    """What closing the tab does: the session's heartbeat stream ends (Gradio then runs unload)."""
    with httpx.Client(timeout=30, trust_env=False) as http:
        with http.stream("GET", f"{url}/gradio_api/heartbeat/{session}") as resp:
            next(resp.iter_bytes())


def test_downloads_and_uploads_go_when_their_session_ends(public_app, tmp_path):
    """Finding 3: notes.json, deck.json and the repro JSON were written to temp folders nothing
    deleted (and Gradio kept a copy of each in its cache); an upload's copy in Gradio's cache stayed
    for the TTL. Now each is the session's: all of it goes when the tab closes."""
    url, tmp, cache = public_app
    c = _client(url, tmp_path)
    _downloads(c)
    from gradio_client import handle_file

    c.predict([handle_file(str(SAMPLE_DIR / "smollm2" / "trace.json"))], "", api_name="/open_upload")
    written = _left(tmp, cache)
    assert len(written) >= 3, written  # notes, deck, at least one repro
    posted = [p for p in cache.rglob("trace.json")]
    assert posted, "the upload's copy in Gradio's cache"
    _end_session(url, c.session_hash)
    assert _wait(lambda: not _left(tmp, cache)), f"downloads outlived their session: {_left(tmp, cache)}"
    assert _wait(lambda: not any(p.exists() for p in posted)), "the upload's copy outlived its session"
    assert KEEP.kept(c.session_hash) == []


def test_downloads_go_after_the_ttl_and_repeat_clicks_keep_one(public_app, tmp_path):
    """A session that never closes: its downloads go after disk_ttl_s unused; clicking again replaces
    the session's previous file of that kind instead of adding one (one client wrote 53 MB in 1.6 s)."""
    url, tmp, cache = public_app
    c = _client(url, tmp_path)
    _downloads(c)
    first = _left(tmp, cache)
    for _ in range(5):
        c.predict(api_name="/download_notes")
    notes = [p for p in _left(tmp, cache) if p.endswith("notes.json")]
    assert len(notes) == 1, notes
    assert first
    lim = Settings(public=True).limits()
    KEEP.sweep(lim, now=time.time() + lim.disk_ttl_s + 1)
    assert _left(tmp, cache) == [], "downloads outlived the TTL"


def _post(url: str, mb: int, forwarded: str | None = None) -> httpx.Response:
    headers = {"x-forwarded-for": forwarded} if forwarded else {}
    data = os.urandom(1024) * (mb * 1024)
    with httpx.Client(timeout=60, trust_env=False) as http:
        return http.post(url + "/gradio_api/upload", files=[("files", ("blob.bin", data))], headers=headers)


def test_gradios_upload_route_is_bounded_per_client(public_app, monkeypatch):
    """Finding 4: posts to /gradio_api/upload, with no event ever called, filled Gradio's cache past
    disk_mb. One client now holds at most disk_client_mb; the next post is answered 413, by name."""
    url, _tmp, cache = public_app
    monkeypatch.setenv("VIEWER_BUDGET_DISK_MB", "200")
    monkeypatch.setenv("VIEWER_BUDGET_DISK_CLIENT_MB", "25")
    before = folder_bytes(cache)
    got = [_post(url, 8).status_code for _ in range(4)]
    assert got == [200, 200, 200, 413], got
    r = _post(url, 8)
    assert r.status_code == 413 and "25 MB budget for disk held by one client" in r.text, r.text
    assert folder_bytes(cache) - before <= 25 << 20


def test_gradios_upload_route_is_bounded_in_total(public_app, monkeypatch):
    """Ten clients (behind a Space's proxy: X-Forwarded-For) post 8 MB each, five at a time, with
    disk_mb at 40: Gradio's cache never holds more than 40 MB; what does not fit is a 413, and the
    oldest unused posts make room for new ones."""
    url, _tmp, cache = public_app
    monkeypatch.setenv("SPACE_ID", "test/keep")
    monkeypatch.setenv("VIEWER_BUDGET_DISK_MB", "40")
    monkeypatch.setenv("VIEWER_BUDGET_DISK_CLIENT_MB", "100")
    KEEP.sweep()  # earlier tests' posts past this smaller budget go first (oldest unused first)
    most = [0]

    def post(i: int) -> int:
        code = _post(url, 8, f"203.0.113.9, 8.8.{i}.1").status_code
        most[0] = max(most[0], folder_bytes(cache))
        return code

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        codes = list(pool.map(post, range(10)))
    assert set(codes) <= {200, 413} and 200 in codes, codes
    assert most[0] <= 40 << 20 and folder_bytes(cache) <= 40 << 20, (most[0], codes)
    codes = [post(10 + i) for i in range(3)]  # one at a time: old unused posts go, new ones fit
    assert codes == [200, 200, 200], codes


def test_keep_admits_within_share_and_total(tmp_path):
    """The keeper's own accounting, without a server: posts still arriving count."""
    from viewer.budgets import BudgetExceeded, limits

    keep = Keep()
    lim = limits(True, {"VIEWER_BUDGET_DISK_MB": "10", "VIEWER_BUDGET_DISK_CLIENT_MB": "6"})
    a = keep.admit("a", 4 << 20, lim)
    with pytest.raises(BudgetExceeded, match="held by one client"):
        keep.admit("a", 3 << 20, lim)  # 4 arriving + 3 > 6
    b = keep.admit("b", 5 << 20, lim)
    with pytest.raises(BudgetExceeded, match="budget for disk the server keeps"):
        keep.admit("c", 2 << 20, lim)  # 9 arriving + 2 > 10
    keep.settle(a, [])
    keep.settle(b, [])
    keep.admit("c", 2 << 20, lim)
