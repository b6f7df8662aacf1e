"""GRPO groups (issue 38, point 4): siblings found, advantages as TRL's GRPOTrainer computes them.

Real data: Atropos ``ScoredDataGroup`` lines NousResearch/atropos committed (tests/data/realworld/atropos): one
line is one group, its ``scores`` the rewards. Expected advantages two ways: an independent formula written here
((r - mean) / (stdev + 1e-4), ``statistics.stdev``: Bessel's correction, as ``torch.std``), and TRL's own lines
run by tests/oracle/trl_advantages.py in the oracle environment (slow; under CI a missing oracle fails).
"""
from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from requires import need

REPO = Path(__file__).resolve().parent.parent
ATROPOS = REPO / "tests" / "data" / "realworld" / "atropos"
ORACLE_ENV = REPO / ".venv-trl"
ORACLE = REPO / "tests" / "oracle" / "trl_advantages.py"
FILES = ("objreward.jsonl", "rubiks_process_results_20.jsonl")
# beside the real groups: what TRL treats specially (one member, every reward equal, a reward function's None)
EDGE = [[1.0, 1.0, 1.0, 1.0], [2.0], [0.3, None, 0.9, 0.1], [None, 0.5], [0.0, 1.0]]


def raw_lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (ATROPOS / name).read_text().splitlines() if x.strip()]


def expected(scores: list) -> list[float]:
    """Independent of viewer.groups: the GRPO formula written with the standard library."""
    vals = [s for s in scores if s is not None]
    if len(scores) == 1 or len(vals) < 2:
        return [0.0] * len(scores)
    mean, sd = statistics.fmean(vals), statistics.stdev(vals)
    return [0.0 if s is None else (s - mean) / (sd + 1e-4) for s in scores]


@pytest.fixture(scope="module", params=FILES)
def atropos(request):
    from viewer.groups import find_groups
    from viewer.sources import open_dataset

    src = open_dataset(ATROPOS / request.param)
    items = [(i, f"row {i}", src.rollout(i)) for i in range(len(src.dataset))]
    return raw_lines(request.param), find_groups(items)


def test_an_atropos_line_is_one_group_with_its_scores_advantages(atropos):
    raw, groups = atropos
    assert len(groups) == len(raw) and all(g.how == "group id" for g in groups)
    row = 0
    for line, g in zip(raw, groups):
        G = len(line["scores"])
        assert [m.ref for m in g.members] == list(range(row, row + G))
        assert [m.reward for m in g.members] == line["scores"]
        # length: the sampled tokens, from the first trained position to the end
        assert [m.length for m in g.members] == [len(t) - next(j for j, x in enumerate(mk) if x != -100)
                                                 for t, mk in zip(line["tokens"], line["masks"])]
        for got, want in zip((m.advantage for m in g.members), expected(line["scores"])):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert g.mean == pytest.approx(statistics.fmean(line["scores"]))
        assert g.zero_spread == (len(set(line["scores"])) == 1)
        row += G


def test_edge_groups_and_the_zero_spread_flag():
    from viewer.groups import advantages

    for rewards in EDGE:
        adv, _mean, std = advantages(rewards)
        assert adv == pytest.approx(expected(rewards), rel=1e-9, abs=1e-12), rewards
    assert advantages([1.0, 1.0, 1.0, 1.0])[2] == 0.0 and advantages([2.0])[2] == 0.0
    assert math.isnan(advantages([None, 0.5])[2])  # one reward: no spread to speak of (TRL: NaN, advantage 0)


def test_siblings_by_prompt_ids_and_num_generations_blocks(tmp_path):
    # capture copies of one prompt are one group (same first-turn prompt ids); rewards from summary.json
    from viewer.config import Settings
    from viewer.groups import find_groups, sibling
    from viewer.sources import load_source

    rewards = {"q0": 1.0, "q1": 0.0, "q2": 0.5, "s0": 1.0, "s1": 1.0}
    for name, r in rewards.items():
        dst = tmp_path / name
        shutil.copytree(REPO / "sample_data" / ("qwen3-tiny" if name[0] == "q" else "smollm2"), dst)
        summ = json.loads((dst / "summary.json").read_text())
        summ["reward"] = r
        (dst / "summary.json").write_text(json.dumps(summ))
    items = [(str(tmp_path / n), n, load_source(tmp_path / n, Settings())) for n in sorted(rewards)]
    groups = find_groups(items)
    assert [(g.how, [m.label for m in g.members]) for g in groups] == [("prompt ids", ["q0", "q1", "q2"]),
                                                                       ("prompt ids", ["s0", "s1"])]
    q, s = groups
    assert [m.advantage for m in q.members] == pytest.approx(expected([1.0, 0.0, 0.5]))
    assert s.zero_spread and s.std_zero and [m.advantage for m in s.members] == [0.0, 0.0]
    assert sibling(q, str(tmp_path / "q2"), +1).label == "q0" and sibling(q, str(tmp_path / "q0"), -1).label == "q2"
    assert sibling(q, "nope", 1) is None
    blocks = find_groups(items, num_generations=2)  # no group id: consecutive rows, G at a time
    assert [[m.label for m in g.members] for g in blocks] == [["q0", "q1"], ["q2", "s0"], ["s1"]]
    assert all(g.how == "num_generations" for g in blocks)


@pytest.mark.slow
def test_advantages_equal_trls_own_lines():
    from viewer.groups import advantages

    py = ORACLE_ENV / "bin" / "python"
    if not py.exists() or not (ORACLE_ENV / "trl-1.16.0").is_dir():
        need("the TRL oracle environment (scripts/setup_oracle.sh)", f"{ORACLE_ENV / 'trl-1.16.0'} not found")
    groups = [line["scores"] for name in FILES for line in raw_lines(name)] + EDGE
    proc = subprocess.run([str(py), str(ORACLE)], input=json.dumps({"groups": groups}), capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(ORACLE_ENV / "trl-1.16.0"),
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["trl_version"] == "1.16.0"
    for rewards, trl in zip(groups, doc["results"], strict=True):
        adv, _mean, std = advantages(rewards)
        # TRL computes in float32: equal to its rounding
        assert adv == pytest.approx(trl["advantages"], rel=2e-6, abs=2e-6), rewards
        assert (not math.isnan(std) and abs(std) <= 1e-8) == trl["std_zero"], rewards


def test_the_groups_screen_lists_groups_shows_siblings_and_walks_them(tmp_path):
    # The handlers without a browser: the Datasets tab opens the real Atropos file, Find groups lists one group
    # per line, a group shows its siblings side by side, a sibling opens, ◀ ▶ walk round the group.
    from types import SimpleNamespace

    import gradio as gr

    from viewer.config import Settings
    from viewer.ui.datasets_tab import DatasetHandlers
    from viewer.ui.groups_tab import GroupHandlers, Walk
    from viewer.ui.store import RolloutStore

    name = "rubiks_process_results_20.jsonl"
    shutil.copy(ATROPOS / name, tmp_path / name)
    raw = raw_lines(name)
    settings = Settings(data_root=str(tmp_path))
    store = RolloutStore(settings)
    shown = []
    browse = SimpleNamespace(outputs=[], show_fn=lambda op, i, note: shown.append(op) or [])
    ds = SimpleNamespace(handlers=DatasetHandlers(settings, store, browse))
    quiet = lambda *a, **k: None  # noqa: E731  (gr.Progress outside an event)
    held = ds.handlers.on_open(name, "auto", "", "", "", "", "", "", "", "row", False, progress=quiet)[0]
    h = GroupHandlers(settings, store, browse, ds)
    gh, summary, table, _sib, _members, _chosen = h.on_find(held, 0, False, progress=quiet)
    assert len(table) == len(raw) and list(table["size"]) == [len(x["scores"]) for x in raw]
    flat = [i for i, x in enumerate(raw) if len(set(x["scores"])) == 1]
    assert list(table.index[table["signal"] == "ZERO SPREAD"]) == flat
    assert f"{len(flat)} (no learning signal)" in summary
    assert list(h.on_flat(gh, True)["group"]) == flat

    gi = 2
    sel = gr.SelectData(None, {"index": [gi, 0], "value": gi, "row_value": list(table.iloc[gi])})
    html, members, chosen = h.on_group(gh, sel)
    assert chosen == gi and html.count('class="ri-grp-card ') == len(raw[gi]["scores"])
    first = sum(len(x["scores"]) for x in raw[:gi])
    assert list(members["row"]) == list(range(first, first + len(raw[gi]["scores"])))
    assert list(members["advantage"]) == pytest.approx([round(a, 4) for a in expected(raw[gi]["scores"])])

    out = h.on_member(gh, chosen, None, gr.SelectData(None, {"index": [1, 0], "value": 2,
                                                              "row_value": list(members.iloc[1])}))
    walk, line = out[-3], out[-1]
    assert isinstance(walk, Walk) and (walk.gi, walk.mi) == (gi, 1) and "2 / 4" in line
    assert shown[-1].rollout.reward == raw[gi]["scores"][1]
    for step, want in ((h.on_next, 2), (h.on_next, 3), (h.on_next, 0), (h.on_prev, 3)):
        out = step(walk, None)
        walk = out[-3]
        assert walk.mi == want and shown[-1].rollout.reward == raw[gi]["scores"][want]
    assert h.on_next(None, None) == [gr.skip()] * 5  # nothing opened from a group yet: nothing to walk
    # what any visitor may send instead: not a number, past the groups, a negative or NaN num_generations
    for junk in ("x", 99, -1, None, 1.5):
        assert h.on_group(gh, gr.SelectData(None, {"index": [0, 0], "value": junk, "row_value": [junk]})) == \
            [gr.skip()] * 3
        assert h.on_member(gh, junk, None, gr.SelectData(None, {"index": [0, 0], "value": 1, "row_value": [1]})) \
            == [gr.skip()] * 5
    for gens in (float("nan"), -3, "many"):
        assert len(h.on_find(held, gens, False, progress=quiet)[2]) == len(raw)  # by group id, as with 0
