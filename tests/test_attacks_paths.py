"""What a public app shows of the server's layout, and what it lets a visitor read (issue 36, findings
11 and 12). The app is the real one, public, on loopback, launched as app.py does; its capture output
root lies inside its data root (a layout the owner may choose), holding a finished capture of another
visitor's. Each test failed on the code before (checked: the old modules swapped in)."""
from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from viewer.config import SAMPLE_DIR, Settings

CAPTURE_ID = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"  # a capture folder's name, as the Capture tab makes them
MARK = "visitors-own-task"  # in that capture's files only


@pytest.fixture(scope="module")
def public_app(tmp_path_factory):
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    root = tmp_path_factory.mktemp("paths-root")
    cap = shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "captures" / CAPTURE_ID)  # a visitor's finished capture
    for f in cap.iterdir():
        if f.is_file():
            f.write_bytes(f.read_bytes().replace(b"max-subarray", MARK.encode()))
    shutil.copytree(SAMPLE_DIR / "smollm2", root / "public" / "cap1")
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", root / "public" / "cap2")
    settings = Settings(public=True, data_root=str(root), capture_out_root=str(root / "captures"))
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield url, root
    demo.close()


def _client(url: str, tmp_path: Path):
    from gradio_client import Client

    return Client(url, verbose=False, download_files=str(tmp_path / "dl"), httpx_kwargs={"timeout": 60})


def _text(out) -> str:
    """Everything an answer carries, files' contents included (gradio_client hands back their paths)."""
    parts = []
    for v in out if isinstance(out, (list, tuple)) else [out]:
        if isinstance(v, str) and len(v) < 1024 and "\n" not in v and v.startswith("/") and Path(v).is_file():
            parts.append(Path(v).read_text(errors="replace"))
        elif isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            parts.append(_text(v))
        else:
            parts.append(json.dumps(v, default=str))
    return "\n".join(parts)


# ---------------------------------------------------------------- 12. another visitor's capture
@pytest.mark.parametrize("fmt", ["auto", "agentcap", "messages"])
def test_a_capture_root_inside_the_data_root_is_not_browsable_as_data(public_app, tmp_path, fmt):
    """The Datasets tab on the data root (or the folder holding the capture root) read a visitor's
    capture files as rows (agentcap: 28 rows of its trace, task and summary)."""
    url, root = public_app
    c = _client(url, tmp_path)
    for where in (".", str(root)):
        status, table, _page = c.predict(where, fmt, "", "", "", "", "", None, None, "row", False,
                                         api_name="/ds_open")
        seen = json.dumps([status, table])
        assert CAPTURE_ID not in seen and MARK not in seen, (where, fmt, status)


def test_a_folder_scan_of_the_data_root_skips_the_capture_root(public_app, tmp_path):
    url, _root = public_app
    c = _client(url, tmp_path)
    out = c.predict("folder of captures", ".", "", 10, None, "local", api_name="/drift_scan")
    summary, table = out[0], out[1]
    rollouts = {row[0] for row in table["data"]}
    assert rollouts and not any(CAPTURE_ID in str(r) for r in rollouts), rollouts
    assert CAPTURE_ID not in summary and MARK not in json.dumps(table)
    assert not _leaks(summary, _root) and not _leaks(json.dumps(out), _root), _leaks(json.dumps(out), _root)


# ---------------------------------------------------------------- 11. the server's layout
def _zip_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f"cap/{f.relative_to(folder)}")
    return buf.getvalue()


def _forbidden(root: Path) -> list[str]:
    return [str(root), str(root.resolve()), "ri-upload-"]


def _leaks(text: str, root: Path) -> list[str]:
    return [b for b in _forbidden(root) if b in text]


def test_the_rollout_header_and_export_name_the_source_as_typed(public_app, tmp_path):
    """The rollout header (and the HTML export, which shows it) named the full source path."""
    url, root = public_app
    c = _client(url, tmp_path)
    shown = _text(c.predict("public/cap2", "", api_name="/open_path"))
    assert "public/cap2" in shown and not _leaks(shown, root), _leaks(shown, root)
    export = _text(c.predict("", "mask", api_name="/export_html"))
    assert "public/cap2" in export and not _leaks(export, root), _leaks(export, root)


def test_the_template_card_names_an_uploads_tokenizer_without_the_servers_folder(public_app, tmp_path):
    """An upload with its own tokenizer/: the Template card showed ``/tmp/ri-upload-…/cap/tokenizer``."""
    from gradio_client import handle_file

    url, root = public_app
    c = _client(url, tmp_path)
    z = tmp_path / "cap.zip"
    z.write_bytes(_zip_of(SAMPLE_DIR / "smollm2"))
    shown = _text(c.predict([handle_file(str(z))], "", api_name="/open_upload"))
    card = _text(c.predict("the open rollout's tokenizer", api_name="/certify"))
    assert "upload:cap/tokenizer" in card and not _leaks(card, root), card[:400]
    assert not _leaks(shown, root), _leaks(shown, root)  # the header and status of the upload too


def test_errors_name_no_server_folder(public_app, tmp_path):
    """A typed path outside the data root named the data root; a broken upload its upload folder."""
    from gradio_client import handle_file

    url, root = public_app
    c = _client(url, tmp_path)
    said = _text(c.predict("/etc/passwd", "", api_name="/open_path"))
    assert "outside the allowed data folder" in said and not _leaks(said, root), said[:600]
    broken = tmp_path / "trace.json"
    broken.write_text('[{"prompt_token_ids": [1, 2], "completion_token_ids": ')
    said = _text(c.predict([handle_file(str(broken))], "", api_name="/open_upload"))
    assert "trace.json" in said and not _leaks(said, root), said[:600]
    status, _table, _page = c.predict("public/nothing-here", "auto", "", "", "", "", "", None, None, "row", False,
                                      api_name="/ds_open")
    assert "no such file or folder" in status and not _leaks(status, root), status


def test_drift_repro_names_the_rollout_by_its_data_root_path(public_app, tmp_path):
    from viewer.sources import load_source

    url, root = public_app
    c = _client(url, tmp_path)
    turn = next(t for t in load_source(SAMPLE_DIR / "qwen3-tiny").agent_turns if t.tool_names)
    c.predict("public/cap2", "", api_name="/open_path")
    c.predict(turn.index, api_name="/select_turn")
    files = c.predict(api_name="/drift_repro")
    docs = [json.loads(Path(f).read_text()) for f in files]
    assert docs and {d["rollout"] for d in docs} == {"public/cap2"}, {d["rollout"] for d in docs}
    assert not [b for b in _forbidden(root) if b in json.dumps(docs)]


def test_a_scan_table_pick_finds_its_rollout_by_the_shown_name(public_app):
    """The scan table shows data-root paths; a pick of one (its select event's row value) opens it."""
    from viewer.ui.drift_handlers import _shown_scan, open_scanned
    from viewer.ui.store import RolloutStore

    _url, root = public_app
    settings = Settings(public=True, data_root=str(root), capture_out_root=str(root / "captures"))
    store = RolloutStore(settings)
    op = store.open(root / "public" / "cap2")
    entry = {"keys": {str(op.rollout.source): op.key}, "kept": {}, "trainers": {}}
    res = {"turns": [{"rollout": str(op.rollout.source), "turn": 1}], "errors": [], "source": str(root / "public")}
    shown = _shown_scan(res, entry, settings)
    assert shown["turns"][0]["rollout"] == "public/cap2" and shown["source"] == "public"
    assert open_scanned(entry, "public/cap2", store, settings).key == op.key


def test_a_local_app_still_shows_full_paths(tmp_path):
    """Local mode is the owner at their own machine: paths unchanged."""
    from viewer.sources.shown import shown_path, shown_text

    s = Settings(public=False, data_root=str(tmp_path))
    p = str(tmp_path / "a" / "trace.json")
    assert shown_path(p, s) == p and shown_text(f"{p}: broken", s) == f"{p}: broken"
    pub = Settings(public=True, data_root=str(tmp_path))
    assert shown_path(p, pub) == "a/trace.json"
    assert shown_path("/tmp/ri-upload-x1y2/cap/tokenizer", pub) == "upload:cap/tokenizer"
    assert shown_text("/tmp/ri-upload-x1y2/cap/trace.json: line 1", pub) == "upload:cap/trace.json: line 1"
