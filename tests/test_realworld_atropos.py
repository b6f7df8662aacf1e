"""Atropos ScoredDataGroup JSONL, read from files NousResearch/atropos committed (tests/data/realworld/atropos).

Every expected figure comes from the raw lines through plain ``json``: rollouts = the sum of G over the
lines, each rollout's ids = its ``tokens`` exactly, trained tokens = positions whose mask is not -100,
reward = its ``scores`` entry, and the G rollouts of a line share one group key.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from viewer.row_browser import browse_page
from viewer.sources import load_source, open_dataset
from viewer.sources.atropos import expand
from viewer.sources.registry import detect_formats

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "atropos"
FILES = ["objreward.jsonl", "rubiks_process_results_20.jsonl"]


def raw_groups(name: str) -> list[dict]:
    return [json.loads(line) for line in (DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_rollouts(name: str) -> list[tuple[int, int, dict]]:
    """(line, index in group, group) for every sequence, in file order."""
    return [(ln, i, g) for ln, g in enumerate(raw_groups(name)) for i in range(len(g["tokens"]))]


@pytest.fixture(scope="module", params=FILES)
def case(request):
    return request.param, open_dataset(DIR / request.param)


def test_detected_as_atropos_only(case):
    name, src = case
    first = raw_groups(name)[0]
    assert src.format.name == "atropos"
    assert [f.name for f in detect_formats(set(first), first)] == ["atropos"]


def test_one_row_per_sequence(case):
    name, src = case
    groups = raw_groups(name)
    assert len(src.dataset) == sum(len(g["tokens"]) for g in groups)
    assert len(groups) >= 2 and all(len(g["tokens"]) > 1 for g in groups)


def test_each_rollout_has_the_file_ids_mask_and_reward(case):
    name, src = case
    for row, (ln, i, g) in enumerate(raw_rollouts(name)):
        ro = src.rollout(row)
        tokens, masks = g["tokens"][i], g["masks"][i]
        assert len(ro.turns) == 1, (ln, i)
        t = ro.turns[0]
        assert list(t.prompt_ids) + list(t.output_ids) == tokens, (ln, i)
        first = next(j for j, m in enumerate(masks) if m != -100)
        assert len(t.prompt_ids) == first
        assert t.trained_tokens == sum(1 for m in masks if m != -100)
        assert t.loss_mask == [0 if m == -100 else 1 for m in masks[first:]]
        assert t.prompt_source == t.output_source == "stored"
        assert ro.reward == g["scores"][i]
        assert ro.origin.token_view == "exact"
        assert not [p for p in ro.problems if p.severity == "error"], ro.problems


def test_rollouts_know_their_group(case):
    name, src = case
    groups = raw_groups(name)
    keys: dict[int, set[str]] = {}
    for row, (ln, i, g) in enumerate(raw_rollouts(name)):
        task = src.rollout(row).task
        assert (task["group_size"], task["index_in_group"]) == (len(g["tokens"]), i)
        assert task["group_scores"] == g["scores"]
        keys.setdefault(ln, set()).add(task["group"])
    assert all(len(k) == 1 for k in keys.values())  # one key per line ...
    assert len({k for ks in keys.values() for k in ks}) == len(groups)  # ... and a different one per line


def test_row_table_lists_every_sequence_sorted_by_reward(case):
    name, src = case
    rollouts = raw_rollouts(name)
    page = browse_page(src, 0, len(rollouts), sort="reward", descending=True)
    assert page.total == len(rollouts)
    rewards = [r["reward"] for r in page.rows]
    assert rewards == sorted((g["scores"][i] for _, i, g in rollouts), reverse=True)
    assert all(r["turns"] == 1 and not r["error"] for r in page.rows)
    lengths = {r["row"]: r["length"] for r in page.rows}
    assert [lengths[k] for k in range(len(rollouts))] == [len(g["tokens"][i]) for _, i, g in rollouts]


def test_conversations_map_atropos_roles():
    """Rubik's cube groups store each sequence's chat with roles ``environment``/``agent``."""
    name = "rubiks_process_results_20.jsonl"
    src = open_dataset(DIR / name)
    for row, (_, i, g) in enumerate(raw_rollouts(name)):
        raw = g["messages"][i]
        ro = src.rollout(row)
        want = [{"agent": "assistant", "environment": "user"}.get(m["role"], m["role"]) for m in raw]
        assert [m["role"] for m in ro.turns[0].messages] + ["assistant"] == want[:len(ro.turns[0].messages) + 1]
        assert ro.turns[0].response["content"] == [m for m in raw if m["role"] == "agent"][-1]["content"]
        assert ro.task["seed"] == g["seed"] and ro.task["parsed_actions"] == g["parsed_actions"][i]


def test_rendered_text_messages_are_kept():
    """The cybersecurity groups store one rendered string per sequence instead of a chat."""
    name = "objreward.jsonl"
    ro = load_source(DIR / name, row=9)
    g = raw_groups(name)[1]
    assert ro.task["rendered_text"] == g["messages"][1]
    assert ro.task["shared_prefix_tokens"] > 0


def test_malformed_groups_are_located_not_misread():
    g = raw_groups("objreward.jsonl")[0]
    bad = dict(g, masks=[m[:-1] for m in g["masks"]], scores=g["scores"][:-1])
    subs = expand(bad)
    assert len(subs) == len(g["tokens"])
    from viewer.sources.atropos import read_row
    from viewer.sources.formats import RowRef

    conv = read_row(subs[-1], RowRef("bad.jsonl", 7))
    msgs = [str(p) for p in conv.problems]
    assert any("scores has 7 entries for 8 sequences" in m for m in msgs)
    assert any(".masks" in m and "no usable mask" in m for m in msgs)
    assert any("score None is not a number" in m for m in msgs)
    assert list(conv.exact_turns[0].output_ids) == g["tokens"][-1] and conv.exact_turns[0].trained_tokens == 0


def test_context_after_the_first_trained_token_stays_in_the_output():
    """``train_on_all_assistant_turns`` masks only the assistant messages: the user/tool tokens between them
    stay in the one sequence, shown as output with mask 0 (the file says nothing of call boundaries).
    A real line, its mask edited the way that option writes it; logprobs added the way ManagedServer does."""
    from viewer.sources.atropos import read_row
    from viewer.sources.formats import RowRef

    g = raw_groups("objreward.jsonl")[0]
    tokens, masks = g["tokens"][0], list(g["masks"][0])
    first = next(j for j, m in enumerate(masks) if m != -100)
    gap = range(first + 10, first + 30)
    for j in gap:
        masks[j] = -100
    masks[first + 40] = 7  # a label that is not the token there: the trainer learns 7
    lps = [1.0 if m == -100 else -0.5 for m in masks]
    conv = read_row(expand(dict(g, masks=[masks] + g["masks"][1:], inference_logprobs=[lps] + [None] * 7))[0],
                    RowRef("edited.jsonl", 0))
    t = conv.exact_turns[0]
    assert list(t.prompt_ids) + list(t.output_ids) == tokens and len(t.prompt_ids) == first
    assert t.trained_tokens == sum(1 for m in masks if m != -100)
    assert [t.loss_mask[j - first] for j in gap] == [0] * len(gap)
    assert t.logprobs[:10] == [-0.5] * 10 and t.logprobs[10:30] == [None] * 20
    assert any("label that is not their token" in str(p) and "position " + str(first + 40) in str(p)
               for p in conv.problems)


def test_loss_on_a_trailing_environment_message_is_flagged():
    """The Rubik's environment tokenises the chat after appending its next observation, so the trained
    tail is the environment's text (its ids: the last header before the trained span is the role of
    message 1, ``environment``, not the agent's of message 2)."""
    name = "rubiks_process_results_20.jsonl"
    src = open_dataset(DIR / name)
    flagged = [("ends with a message of role 'environment'" in " ".join(map(str, src.rollout(row).problems)))
               for row in range(len(src.dataset))]
    want = [g["messages"][i][-1]["role"] == "environment" for _, i, g in raw_rollouts(name)]
    assert flagged == want and any(want) and not all(want)
    g = raw_groups(name)[0]
    tokens, masks = g["tokens"][0], g["masks"][0]
    first = next(j for j, m in enumerate(masks) if m != -100)
    headers = [j for j in range(first) if tokens[j] == 128006]  # Llama 3 <|start_header_id|>
    assert [tokens[j + 1] for j in headers][1::2] == [tokens[headers[1] + 1]] * 2  # environment, environment
