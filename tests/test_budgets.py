"""Budgets as one concept: settings, documentation, the answer and scan limits, and heavy work kept
off other visitors' browsing (issue 26). The per-attack suites are tests/test_budgets_*.py."""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from budget_bombs import bounded, message_of, public
from viewer.budgets import BUDGETS, BudgetExceeded, _fmt, env_name, limits
from viewer.config import SAMPLE_DIR, Settings
from viewer.ui import store as store_mod
from viewer.ui.store import RolloutStore

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_MD = (ROOT / "docs" / "SETTINGS.md").read_text()
BUDGETS_TABLE = SETTINGS_MD.split("## Resource budgets", 1)[1].split("\n## ", 1)[0]
SECURITY = (ROOT / "docs" / "SECURITY.md").read_text()


@pytest.mark.parametrize("b", BUDGETS, ids=lambda b: b.name)
def test_every_budget_is_documented(b):
    """docs/SETTINGS.md's budgets table (linked from the README) has each variable with its two
    defaults; docs/SECURITY.md's Resources section names it, and every test it cites exists."""
    row = re.search(rf"^\| `{env_name(b.name)}` \| ([^|]+) \| ([^|]+) \|", BUDGETS_TABLE, re.M)
    assert row, f"{env_name(b.name)} is not in docs/SETTINGS.md's budgets table"
    assert (row.group(1).strip(), row.group(2).strip()) == (_fmt(b.local), _fmt(b.public))
    resources = SECURITY.split("## Resources", 1)[1]
    assert f"`{b.name}`" in resources


def test_cited_tests_exist():
    resources = SECURITY.split("## Resources", 1)[1]
    cited = re.findall(r"`(tests/test_budgets\w*\.py)::(\w+)", resources)
    assert cited
    for path, name in cited:
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"{path}::{name} does not exist"


def test_modes_and_overrides():
    assert limits(public=False, environ={}).turns == 100_000
    assert limits(public=True, environ={}).turns == 2_000
    space, local = {"SPACE_ID": "o/s"}, {"VIEWER_PUBLIC": "0"}
    assert Settings.from_env(space).limits(space).turns == 2_000  # a Space is public
    assert Settings.from_env(local).limits(local).turns == 100_000
    assert limits(public=True, environ={"VIEWER_BUDGET_TURNS": "7"}).turns == 7
    assert limits(public=True, environ={"VIEWER_BUDGET_TURNS": "0"}).turns == 2_000
    with pytest.raises(ValueError, match="VIEWER_BUDGET_TURNS='many': not a number"):
        limits(False, environ={"VIEWER_BUDGET_TURNS": "many"})
    s = Settings.from_env({"VIEWER_PUBLIC": "1"})
    assert s.limits({"VIEWER_PUBLIC": "1"}).public and s.limits({}).template_s == 5
    assert not Settings().limits({}).public


def test_a_derived_answer_over_response_mb_is_refused(tmp_path, monkeypatch):
    """What goes to browsers is made through store.derived: a value over the budget is refused,
    named, and not kept (the next ask makes it again, within budget if it now is)."""
    settings = public(monkeypatch, tmp_path, response_mb=1)
    store = RolloutStore(settings)
    with pytest.raises(BudgetExceeded, match=r"turn 0 payload: 2\.\d+ MB, over the 1 MB budget"):
        store.derived("k", ("turn", 0, "payload"), lambda: "x" * (2 << 20))
    assert store.derived("k", ("turn", 0, "payload"), lambda: "small") == "small"


def test_the_dedupe_scan_stops_at_rows_scanned(tmp_path, monkeypatch):
    """The newest-row-per-key scan of a dataset with a (key, version) pair reads at most
    ``rows_scanned`` rows."""
    from _row_fixtures import opencode_rows, write_jsonl
    from viewer.sources import SourceError, open_dataset

    settings = public(monkeypatch, tmp_path, rows_scanned=50)
    base = opencode_rows()
    rows = [dict(base[i % 3], batch_id=i) for i in range(80)]  # opencode exports: newest batch_id per session
    write_jsonl(rows, tmp_path / "rows.jsonl")
    src = open_dataset(tmp_path / "rows.jsonl", settings)
    assert src.format.name == "opencode" and src.format.dedupe == ("session_id", "batch_id")
    with pytest.raises(SourceError, match="over the 50 rows budget"):
        src.visible_rows()


def _template_bomb(root: Path) -> Path:
    import shutil

    cap = root / "bomb"
    shutil.copytree(SAMPLE_DIR / "smollm2" / "tokenizer", cap / "tokenizer")
    (cap / "tokenizer" / "chat_template.jinja").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    rec = {"request": {"messages": [{"role": "user", "content": "hi"}]},
           "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}}
    (cap / "trace.json").write_text(json.dumps([rec]))
    return cap


def test_other_visitors_stay_fast_during_a_template_bomb(tmp_path, monkeypatch):
    """One visitor's capture renders a template that would loop for ever (stopped by its
    ``template_s`` budget); meanwhile another opens the sample and shows each of its turns, and all of
    that finishes while the bomb is still rendering (the bomb runs in a worker process, not in the
    server's threads, so nobody waits for it). A condition, not a stopwatch: it holds on a busy machine
    too. The budget is four times what the other visitor's pass took just before on this machine (2 to
    8 s): the bomb burns a core for all of it, and a longer bomb proves nothing more."""
    from viewer.tokenizer import render_worker
    from viewer.views import turn_view

    settings = public(monkeypatch, tmp_path)
    store = RolloutStore(settings)
    bomb = store.open(_template_bomb(tmp_path))
    sample = store.open(SAMPLE_DIR / "qwen3-tiny")
    turns = len(sample.rollout.turns)
    for i in range(turns):  # warm: the sample's own views are cached per visitor key
        turn_view(sample.rollout, i, sample.choice.tokenizer, sample.table)

    def visit(during=None) -> int:
        views = 0
        for i in range(turns):
            op = RolloutStore(settings).open(SAMPLE_DIR / "qwen3-tiny")  # a new visitor's own open
            turn_view(op.rollout, i, op.choice.tokenizer, op.table)
            views += 1
            if during is not None:
                assert during.is_alive(), f"the other visitor's view {i} ended after the bomb: it waited for it"
        return views

    render_worker.shutdown(clear_cache=True)  # the pass as the attack's: its renders start a fresh worker
    t0 = time.monotonic()
    visit()
    budget = min(8.0, max(2.0, round(4 * (time.monotonic() - t0) + 0.5)))
    monkeypatch.setenv(env_name("template_s"), f"{budget:g}")  # renders read their budget from here
    render_worker.shutdown(clear_cache=True)

    got = []

    def attack():
        got.append(turn_view(bomb.rollout, 0, bomb.choice.tokenizer, bomb.table))

    th = threading.Thread(target=attack, daemon=True)
    t_bomb = time.monotonic()
    th.start()
    deadline = time.monotonic() + 60
    while render_worker.stats()["busy"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # wait until the bomb holds a worker (a condition: it is rendering from here)
    assert render_worker.stats()["busy"] == 1
    views = visit(during=th)
    th.join(60)
    assert not th.is_alive() and views == turns
    assert time.monotonic() - t_bomb >= budget - 0.5, "the bomb ended before its budget: it was not a bomb"
    why = got[0].turn.origin.rerender_error or ""
    assert f"{budget:g} s budget" in why, why  # it ended at the budget set above


def test_large_opens_take_turns_and_small_ones_pass(tmp_path, monkeypatch):
    """Sources over HEAVY_BYTES open one at a time: while one is opening, a second large open waits
    (here 0.5 s) and is told to try again; a small one is not held."""
    from viewer.sources import SourceError

    monkeypatch.setattr(store_mod, "HEAVY_WAIT_S", 0.5)
    monkeypatch.setattr(store_mod, "HEAVY_BYTES", 1 << 20)
    settings = public(monkeypatch, tmp_path)
    rec = {"request": {"messages": [{"role": "user", "content": "x" * 1000}]},
           "response": {"choices": [{"message": {"role": "assistant", "content": "y"}}]}}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trace.json").write_text(json.dumps([rec] * 1500))
    store = RolloutStore(settings)
    assert store._heavy_gate.acquire(timeout=1)  # a large open in progress
    try:
        _, err, elapsed = bounded(lambda: store.open(tmp_path / "b"), 10)
        assert isinstance(err, SourceError) and "another large file is being opened" in message_of(err)
        assert 0.4 < elapsed < 5
        op, err, elapsed = bounded(lambda: store.open(SAMPLE_DIR / "qwen3-tiny"), 20)
        assert err is None and op.rollout.turns
    finally:
        store._heavy_gate.release()
    op = store.open(tmp_path / "a")
    assert len(op.rollout.turns) == 1500


def test_the_app_says_when_what_it_would_send_is_over_response_mb(monkeypatch):
    """Opening a sample whose screens are over ``response_mb`` shows the budget's message in the
    status line (the handler answers; before, the BudgetExceeded escaped as a generic error)."""
    monkeypatch.setenv("VIEWER_BUDGET_RESPONSE_MB", "0.02")  # 20 KB: the sample's token view is bigger
    monkeypatch.setenv("VIEWER_PLOT_DEFER_S", "0")
    import aio
    from gradio.state_holder import SessionState

    from viewer.ui import create_app

    demo = create_app(Settings.from_env())
    fn = next(f for f in demo.fns.values() if f.api_name == "open_sample")
    answer = aio.run(demo.process_api(fn, ["qwen3-tiny", "", None], state=SessionState(demo)))["data"]  # as Gradio calls it
    text = json.dumps(answer, default=str)
    assert "VIEWER_BUDGET_RESPONSE_MB" in text and "budget" in text


def test_a_zip_decompresses_within_decompressed_mb(tmp_path, monkeypatch):
    """A zip whose entries decompress past ``decompressed_mb`` is refused whole, though it is under
    ``max_file_mb`` (worked by hand: 3 MB of zeros against a 2 MB budget), and nothing is left."""
    import zipfile

    from viewer.sources.upload import UploadRefused, intake_upload

    monkeypatch.setenv("VIEWER_BUDGET_DECOMPRESSED_MB", "2")
    z = tmp_path / "up.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cap/trace.json", b"0" * (3 << 20))
    dest = tmp_path / "dest"
    with pytest.raises(UploadRefused, match="decompressed_mb"):
        intake_upload(z, dest, Settings(max_file_mb=150))
    assert not any(p.is_file() for p in dest.rglob("*"))
