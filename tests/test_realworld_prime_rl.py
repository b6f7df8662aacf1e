"""prime-rl trainer token exports, written by prime-rl's own ``token_export.py`` (tests/data/realworld/prime_rl).

Every expected figure comes from the raw lines through plain ``json``: one rollout per line, one turn per
run of ``loss_mask`` true, each turn's ids / sampler logprobs / trainer logprobs the file's on that run and
its prompt every token before it. The mismatch numbers the app shows (token view Δ mode, rescore panel,
importance-sampling ratios) must equal ``exp(trainer_logprobs − inference_logprobs)`` worked out here from
the raw file, and prime-rl's own ``importance_ratio`` column within float32 rounding, with no model run.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.rescore import importance as IS
from viewer.rescore.recorded import RECORDED_DEVICE, recorded_result
from viewer.row_browser import browse_page
from viewer.sources import load_source, open_dataset
from viewer.sources.registry import detect_formats

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "prime_rl"
FILES = ["w559b447/token_exports/step_0/rank_0.jsonl", "wfa21395a/token_exports/step_3/rank_0.jsonl"]
REALWORLD = DIR.parent
SHARED = Path(__file__).resolve().parents[2] / "shared" / "realdata"


def raw_lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_runs(mask: list[bool]) -> list[tuple[int, int]]:
    """[start, end) of every run of true in a raw loss mask (worked out here, not by the reader)."""
    runs, i = [], 0
    while i < len(mask):
        if mask[i]:
            j = i
            while j < len(mask) and mask[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


@pytest.fixture(scope="module", params=FILES)
def case(request):
    return request.param, open_dataset(DIR / request.param)


def test_detected_as_prime_rl_only(case):
    name, src = case
    first = raw_lines(name)[0]
    assert src.format.name == "prime-rl-tokens"
    assert [f.name for f in detect_formats(set(first), first)] == ["prime-rl-tokens"]


def test_no_other_real_file_is_taken_for_a_token_export():
    """The detector is strict: no other producer's real file (first line / object) matches it."""
    checked = 0
    for root in (REALWORLD, SHARED):
        for f in sorted(root.rglob("*")) if root.is_dir() else []:
            if f.suffix not in (".jsonl", ".json", ".traj") or DIR in f.parents or f.stat().st_size > 5 << 20:
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
            try:
                first = json.loads(text.splitlines()[0]) if f.suffix == ".jsonl" else json.loads(text)
            except (ValueError, IndexError):
                continue
            for row in (first if isinstance(first, list) else [first])[:3]:
                if isinstance(row, dict):
                    assert "prime-rl-tokens" not in [x.name for x in detect_formats(set(row), row)], f
                    checked += 1
    assert checked >= 5


def test_one_rollout_per_line_with_the_file_ids_mask_and_logprobs(case):
    name, src = case
    lines = raw_lines(name)
    assert len(src.dataset) == len(lines) == 3
    for row, raw in enumerate(lines):
        ro = src.rollout(row)
        ids, mask = raw["token_ids"], raw["loss_mask"]
        runs = raw_runs(mask)
        assert len(ro.turns) == len(runs) >= 1, row
        for t, (s, e) in zip(ro.turns, runs):
            assert list(t.prompt_ids) == ids[:s] and list(t.output_ids) == ids[s:e]
            assert list(t.logprobs) == raw["inference_logprobs"][s:e]
            assert list(t.trainer_logprobs) == raw["trainer_logprobs"][s:e]
            assert t.loss_mask == [1] * (e - s)
            assert (t.prompt_source, t.output_source) == ("engine", "stored")
        st = ro.stats()
        assert st["trained_tokens"] == sum(mask) == st["output_tokens"]
        assert st["prompt_tokens"] == sum(s for s, _ in runs)
        assert ro.origin.token_view == "exact" and ro.problems == []
        assert ro.task["env_name"] == raw["env_name"] and ro.task["step"] == raw["step"]
        assert ro.summary["advantage"] == raw["advantages"][runs[0][0]]
        for flag in ("is_masked", "is_masked_high", "is_masked_low"):
            want = None if raw[flag][0] is None else sum(1 for v in raw[flag] if v)
            assert ro.summary.get(f"{flag}_tokens") == want, (row, flag)
        # older writers carry a per-token reward column: the rollout's reward is its value
        assert ro.reward == (raw["rewards"][runs[0][0]] if "rewards" in raw else None)


def test_first_line_figures():
    """The first line of the newest writer's file, by hand from the raw JSON."""
    raw = raw_lines(FILES[0])[0]
    ro = load_source(DIR / FILES[0], row=0)
    first = raw["loss_mask"].index(True)
    t = ro.turns[0]
    assert t.output_ids[:5] == raw["token_ids"][first:first + 5]
    assert t.logprobs[:5] == raw["inference_logprobs"][first:first + 5]
    assert t.trainer_logprobs[:5] == raw["trainer_logprobs"][first:first + 5]
    assert len(raw["token_ids"]) == 109 and sum(raw["loss_mask"]) == 54 and len(ro.turns) == 2


def test_masked_and_rewarded_lines_are_present():
    """The files exercise what the views show: a DPPO-masked token each way, null mask columns (IPO
    loss), per-token rewards (older writer) and a sample with component weight streams."""
    new, old = raw_lines(FILES[0]), raw_lines(FILES[1])
    assert sum(map(bool, new[0]["is_masked_high"])) == 1 and sum(map(bool, new[1]["is_masked_low"])) == 1
    assert old[1]["is_masked"][0] is None and "rewards" in old[0] and "rewards" not in new[0]
    assert new[2]["rl_weights"][0] is not None and new[0]["rl_weights"][0] is None


def _expected_ratios(raw: dict) -> list[tuple[int, float, float, float]]:
    """(position, trainer − sampler, exp of it, prime-rl's importance_ratio) for every trained token."""
    return [(i, raw["trainer_logprobs"][i] - raw["inference_logprobs"][i],
             math.exp(raw["trainer_logprobs"][i] - raw["inference_logprobs"][i]), raw["importance_ratio"][i])
            for i, m in enumerate(raw["loss_mask"]) if m]


def _opened(name: str, row: int):
    """The rollout as the app opens it (the shared store), and the rescore the app then holds for it."""
    from viewer.ui import rescores
    from viewer.ui.store import RolloutStore

    store = RolloutStore(Settings.from_env())
    op = store.open_shared(f"test-prime-rl|{name}|{row}", lambda: (open_dataset(DIR / name).rollout(row), None))
    return op, rescores.get(op.key)


@pytest.mark.parametrize("name", FILES)
def test_mismatch_views_show_the_recorded_trainer_logprobs_without_a_model(name):
    from viewer.render import turn_delta

    for row, raw in enumerate(raw_lines(name)):
        op, res = _opened(name, row)
        assert res is not None and res.device == RECORDED_DEVICE and res.seconds == 0.0
        want = _expected_ratios(raw)
        for _, d, r, theirs in want:
            assert r == pytest.approx(theirs, rel=2e-6)  # prime-rl's column is float32
        # the token view's Δ mode: trainer logprob and Δ at every trained position, nothing elsewhere
        by_pos = {i: d for i, d, _, _ in want}
        for t in op.rollout.turns:
            n = len(t.prompt_ids) + len(t.output_ids)
            got = turn_delta(res, t.index, len(t.prompt_ids), n)
            for i in range(n):
                if i in by_pos and i >= len(t.prompt_ids):  # this turn's output (earlier ones: its prompt)
                    assert got["dl"][i] == pytest.approx(by_pos[i], abs=1e-6)
                    assert got["tr"][i] == pytest.approx(raw["trainer_logprobs"][i], abs=1e-6)
                else:
                    assert got["dl"][i] is None and got["tr"][i] is None
        # the rescore panel's totals and per-turn table
        tot = res.totals()
        assert tot["tokens"] == sum(raw["loss_mask"])
        assert tot["ratio_min"] == pytest.approx(min(r for *_, r, _ in want), abs=1e-6)
        assert tot["ratio_max"] == pytest.approx(max(r for *_, r, _ in want), abs=1e-6)
        assert tot["max_abs_delta"] == pytest.approx(max(abs(d) for _, d, _, _ in want), abs=1e-6)
        assert [t["tokens"] for t in res.to_json()["turns"]] == [e - s for s, e in raw_runs(raw["loss_mask"])]
        # importance sampling (token mode, bounds nothing reaches): every token's ratio is exp(Δ)
        batch = IS.batch_from_rescore(res)
        toks = IS.tokens_from_rescore(res, IS.importance(batch, "token_truncate", 1e-9, 1e9))
        assert [x["position"] for x in toks] == [i for i, *_ in want]
        for x, (_, _, r, theirs) in zip(toks, want):
            assert x["ratio"] == pytest.approx(r, rel=1e-6) and x["ratio"] == pytest.approx(theirs, rel=2e-6)


def test_a_model_rescore_is_not_replaced_by_the_recorded_one():
    from viewer.ui import rescores

    op, res = _opened(FILES[0], 1)
    mine = recorded_result(op.rollout)
    rescores.put(op.key, mine, "someone", ("model",))
    again, got = _opened(FILES[0], 1)
    assert again.key == op.key and got is mine


def test_row_table_lists_every_line(case):
    name, src = case
    lines = raw_lines(name)
    page = browse_page(src, 0, 50)
    assert page.total == len(lines)
    assert [r["task"] for r in page.rows] == [raw["env_name"] for raw in lines]
    assert [r["turns"] for r in page.rows] == [len(raw_runs(raw["loss_mask"])) for raw in lines]
    assert [r["length"] for r in page.rows] == [len(raw["token_ids"]) for raw in lines]
    assert not any(r["error"] for r in page.rows)


def test_malformed_lines_are_located_not_misread():
    from viewer.sources.formats import RowRef, RowReadError
    from viewer.sources.prime_rl import read_row

    raw = raw_lines(FILES[0])[0]
    ref = RowRef("bad.jsonl", 4)
    conv = read_row(dict(raw, trainer_logprobs=raw["trainer_logprobs"][:-1]), ref)
    assert any(".trainer_logprobs" in str(p) and "108 entries for 109 token ids" in str(p) for p in conv.problems)
    assert all(t.trainer_logprobs is None for t in conv.exact_turns)
    assert recorded_result(_rollout(conv)) is None
    with pytest.raises(RowReadError, match="no trained token"):
        read_row(dict(raw, loss_mask=[False] * len(raw["loss_mask"])), ref)
    with pytest.raises(RowReadError, match=r"row 4 \.loss_mask"):
        read_row(dict(raw, loss_mask=raw["loss_mask"][:-3]), ref)
    tail = dict(raw, token_ids=raw["token_ids"] + [198], **{k: raw[k] + [raw[k][-1] if k != "loss_mask" else False]
                                                            for k in ("loss_mask", "inference_logprobs",
                                                                      "trainer_logprobs")})
    conv = read_row(tail, ref)
    assert any("last 1 token(s) are context" in str(p) for p in conv.problems)


def _rollout(conv):
    from viewer.sources.derive import to_rollout

    return to_rollout(conv, source="bad.jsonl", fmt="prime-rl-tokens", label="bad.jsonl")


@pytest.mark.parametrize("name", FILES)
def test_rescore_cli_takes_the_recorded_trainer_logprobs(name, tmp_path, capsys):
    """``rescore FILE --model recorded``: every trained token of every line, no model and no torch needed;
    the per-token table's Δ and token-mode ratio are the raw file's."""
    import pyarrow.parquet as pq

    from viewer.cli import main

    out = tmp_path / "tokens.parquet"
    assert main(["rescore", str(DIR / name), "--model", "recorded", "--json", "--quiet", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    lines = raw_lines(name)
    assert doc["rollouts"] == {"total": len(lines), "rescored": len(lines), "failed": 0}
    want = [(row, *x) for row, raw in enumerate(lines) for x in _expected_ratios(raw)]
    assert doc["totals"]["tokens"] == len(want) == sum(sum(raw["loss_mask"]) for raw in lines)
    table = pq.read_table(out).to_pylist()
    assert len(table) == len(want)
    for got, (row, pos, d, r, theirs) in zip(table, want):
        raw = lines[row]
        assert got["position"] == pos and got["id"] == raw["token_ids"][pos]
        assert (got["sampler"], got["trainer"]) == (raw["inference_logprobs"][pos], raw["trainer_logprobs"][pos])
        assert got["delta"] == pytest.approx(d, abs=1e-12)
        assert got["ratio.token_truncate"] == pytest.approx(r, rel=1e-6)  # under TRL's default clip max 3
        assert got["ratio.token_truncate"] == pytest.approx(theirs, rel=2e-6)


def test_the_app_opens_a_token_export_with_its_mismatch_views(tmp_path, monkeypatch):
    """Through Gradio's own process_api, as a visitor: open the file, open the rescore panel. The panel
    shows the recorded trainer logprobs (no Rescore pressed, no model), not as another visitor's run, and
    the token view already carries the Δ arrays."""
    import shutil

    import aio
    from gradio.state_holder import SessionState

    from viewer.ui import create_app

    shutil.copy(DIR / FILES[0], tmp_path / "rank_0.jsonl")
    monkeypatch.setenv("VIEWER_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("VIEWER_PLOT_DEFER_S", "0")
    demo = create_app(Settings.from_env())
    fns = {f.api_name: f for f in demo.fns.values()}
    st = SessionState(demo)
    opened = aio.run(demo.process_api(fns["open_path"], ["rank_0.jsonl", "", None], state=st))
    view = next(v for c, v in zip(fns["open_path"].outputs, opened["data"]) if c.elem_id == "token-view")
    assert '"dl":' in str(view) and '"tr":' in str(view)
    panel = fns["rescore_open"]
    ins = [None] * len(panel.inputs)
    for k, c in enumerate(panel.inputs):
        ins[k] = {"is-mode": IS.DEFAULT_MODE, "is-min": "none", "is-max": "3"}.get(c.elem_id)
    got = aio.run(demo.process_api(panel, ins, state=st))
    out = {c.elem_id: v for c, v in zip(panel.outputs, got["data"])}
    assert "recorded by the trainer" in str(out["rescore-summary"]) and "A cached result" not in str(out)
    raw = raw_lines(FILES[0])[0]
    rows = out["rescore-turns"]["data"]
    assert [r[4] for r in rows] == [e - s for s, e in raw_runs(raw["loss_mask"])]
    assert max(r[8] for r in rows) == round(max(r for *_, r, _ in _expected_ratios(raw)), 3)
