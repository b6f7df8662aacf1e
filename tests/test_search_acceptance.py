"""Issue 38's acceptance: a folder of 210 rollouts made of copies of three real captures (two bundled samples
recorded by our proxy from vLLM, and our own capture fixture), varied (rewards, groups, steps, logprobs zeroed or
set to a repeated placeholder in some copies), indexed by the drift scan and searched with every kind of query.
Each query's expected hits are worked out here from the raw files with plain ``json`` (the capture layout:
``trace.json`` records, ``kind: main`` = an agent turn whose index is the record's place in the list), never
with our reader. Drift causes and lint rules are what the drift scan and the linter say (the index must agree
with them) and, where the raw files decide a rule or a cause, what the raw files say (missing tokenizer folders,
placeholder logprobs on masked positions, added tokens spelled by sampled pieces); a prime-rl token export
(written by prime-rl's own code) checks ``delta`` and ``ratio``.
"""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from viewer.config import Settings
from viewer.search import build_index, facet_clause, search

REPO = Path(__file__).resolve().parent.parent
CAPTURES = {"q": REPO / "sample_data" / "qwen3-tiny", "s": REPO / "sample_data" / "smollm2",
            "o": REPO / "tests" / "data" / "capture_ours"}
COPIES = 70  # of each: 210 rollouts
REWARDS = (0.0, 0.25, 0.5, 0.75, 1.0)
PRIME = REPO / "tests" / "data" / "realworld" / "prime_rl" / "w559b447" / "token_exports" / "step_0" / "rank_0.jsonl"
pytestmark = pytest.mark.slow


def _vary(folder: Path, i: int) -> None:
    """Copy ``i``: its reward, group and step in summary.json; some copies' last agent turn with logprobs set to
    a repeated placeholder (-9999 at three tokens) or one exactly-zero logprob, as corrupted exports carry
    (in trace.json and turns.json alike)."""
    sp = folder / "summary.json"
    summary = json.loads(sp.read_text())
    summary.update(reward=REWARDS[i % 5], group=f"g{i // 4}", step=i // 30)
    sp.write_text(json.dumps(summary))
    if i % 7 not in (3, 5):
        return
    tp = folder / "trace.json"
    recs = json.loads(tp.read_text())
    last = max(k for k, r in enumerate(recs) if r.get("kind") == "main" and r.get("completion_token_ids"))
    rec = recs[last]
    where, value = ((1, 2, 3), -9999.0) if i % 7 == 3 else ((0,), 0.0)
    # the same tokens in both files that carry them: the trace's logprob entries, the turns file's row of that call
    up = folder / "turns.json"
    rows = json.loads(up.read_text())
    row = next(x for x in rows if x["call"] == rec["turn"])
    for j in where:
        rec["logprobs"][j]["logprob"] = value
        rec["per_token_logps"][j] = value
        row["per_token_logps"][j] = value
    tp.write_text(json.dumps(recs))
    up.write_text(json.dumps(rows))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("night") / "runs"
    root.mkdir()
    for i in range(COPIES):
        for key, src in CAPTURES.items():
            dst = root / f"{key}{i:03d}"
            shutil.copytree(src, dst)
            _vary(dst, i)
    return root


@pytest.fixture(scope="module")
def built(folder):
    return build_index(folder, Settings(), workers=1)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def raw_turns(cap: Path) -> list[dict]:
    """A capture's agent turns from its raw trace.json (plain json)."""
    recs = json.loads((cap / "trace.json").read_text())
    out, seen = [], 0
    for i, r in enumerate(recs):
        if r.get("kind") != "main":
            continue
        msgs = r["request"]["messages"]
        m = ((r["response"].get("choices") or [{}])[0]).get("message") or {}  # a failed call has no choice
        calls = m.get("tool_calls") or []
        parts = [_text(x.get("content")) for x in msgs[seen:] if x.get("role") not in ("assistant", "system")]
        parts += [_text(m.get("content")), "\n".join(f"{c['function']['name']} {c['function']['arguments']}"
                                                       for c in calls)]
        seen = len(msgs)
        ids = r.get("completion_token_ids") or []
        ents = r.get("logprobs") or [] if ids else []
        out.append({"turn": i, "ids": ids, "lps": [e["logprob"] for e in ents],
                    "pieces": [bytes(e["bytes"]).decode("utf-8", "replace") if e.get("bytes") else "" for e in ents],
                    "tools": [c["function"]["name"] for c in calls], "text": "\n".join(p for p in parts if p),
                    "prompt": len(r.get("prompt_token_ids") or []), "model": r["request"]["model"]})
    return out


@pytest.fixture(scope="module")
def raw(folder) -> dict[str, dict]:
    """name → {reward, group, model, turns} read from each copy's files."""
    out = {}
    for cap in sorted(folder.iterdir()):
        if not cap.is_dir() or cap.name.startswith("."):
            continue
        summary = json.loads((cap / "summary.json").read_text())
        turns = raw_turns(cap)
        out[cap.name] = {"reward": summary["reward"], "group": summary["group"], "model": turns[0]["model"],
                         "turns": turns}
    return out


def _hits(folder, q: str, limit: int = 10_000):
    res = search(folder, q, Settings(), limit=limit, build=False)
    assert res.total == len(res.hits), (q, res.total)
    return res


def _turn_set(res) -> set[tuple[str, int]]:
    return {(Path(h.source).name, h.turn) for h in res.hits}


def _expect_turns(raw, pred) -> set[tuple[str, int]]:
    return {(name, t["turn"]) for name, r in raw.items() for t in r["turns"] if pred(r, t)}


def test_the_index_holds_every_rollout_and_agent_turn(built, raw):
    assert built.rollouts == len(raw) >= 200
    assert built.turns == sum(len(r["turns"]) for r in raw.values())
    assert built.errors == [] and built.rebuilt == len(raw) and built.reused == 0


@pytest.mark.parametrize("q, pred", [
    ("solution.py", lambda r, t: "solution.py" in t["text"].lower()),
    ('"prints 6 on example"', lambda r, t: "prints 6 on example" in t["text"].lower()),
    ("/printf '[0-9]/", lambda r, t: re.search(r"printf '[0-9]", t["text"]) is not None),
    ("tool:bash", lambda r, t: "bash" in t["tools"]),
    ("tool:write AND NOT model:smol", lambda r, t: "write" in t["tools"] and "smol" not in r["model"].lower()),
    ("(tool:bash OR tool:write) reward<0.5", lambda r, t: bool({"bash", "write"} & set(t["tools"])) and r["reward"] < 0.5),
    ("-tool:bash group:g3", lambda r, t: "bash" not in t["tools"] and r["group"] == "g3"),
    ("logprob<-15", lambda r, t: any(v < -15 for v in t["lps"])),
    ("placeholder>0", lambda r, t: any(t["lps"].count(v) >= 3 for v in t["lps"] if v <= -1)),
    ("zero>0", lambda r, t: 0.0 in t["lps"]),
], ids=lambda x: x if isinstance(x, str) else "")
def test_turn_queries_find_what_the_raw_files_hold(built, folder, raw, q, pred):
    want = _expect_turns(raw, pred)
    assert want and len(want) < sum(len(r["turns"]) for r in raw.values()), q  # the query separates something
    assert _turn_set(_hits(folder, q)) == want


@pytest.mark.parametrize("q, pred", [
    ("reward<0.5", lambda r: r["reward"] < 0.5), ("reward>=0.75", lambda r: r["reward"] >= 0.75),
    ("model:smol", lambda r: "smol" in r["model"].lower()), ("model:qwen OR reward=0", lambda r: "qwen" in
                                                             r["model"].lower() or r["reward"] == 0),
], ids=lambda x: x if isinstance(x, str) else "")
def test_rollout_queries_give_one_hit_a_rollout_worst_reward_first(built, folder, raw, q, pred):
    res = _hits(folder, q)
    want = {n for n, r in raw.items() if pred(r)}
    assert res.level == "rollout" and {Path(h.source).name for h in res.hits} == want and len(res.hits) == len(want)
    rewards = [h.reward for h in res.hits]
    assert rewards == sorted(rewards)
    assert all(h.turn == raw[Path(h.source).name]["turns"][0]["turn"] for h in res.hits)


def test_a_logprob_hit_lands_on_the_lowest_token_and_hits_rank_worst_first(built, folder, raw):
    res = _hits(folder, "logprob<-12 tool:bash")
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores) and res.hits
    for h in res.hits:
        t = next(t for t in raw[Path(h.source).name]["turns"] if t["turn"] == h.turn)
        assert h.score == pytest.approx(min(t["lps"]), rel=1e-6) and h.pos == t["lps"].index(min(t["lps"]))
        assert h.tok == t["prompt"] + h.pos  # the token view's position (a deep link's tok=)
        link = parse_qs(h.link())
        assert link["source"] == [h.source] and link["turn"] == [str(h.turn)] and link["tok"] == [str(h.tok)]
        s = h.snippet
        assert s.ids == t["ids"][s.start:s.start + len(s.ids)] and h.pos in range(s.start, s.start + len(s.ids))
        assert s.pieces == t["pieces"][s.start:s.start + len(s.ids)] and s.hit == (h.pos, h.pos + 1)


def _first_at(seq: list, sub: list) -> int | None:
    return next((k for k in range(len(seq) - len(sub) + 1) if seq[k:k + len(sub)] == sub), None)


def test_token_id_and_token_text_sequences(built, folder, raw):
    sm = raw["s000"]["turns"][1]  # smollm2's bash call: its first two sampled ids
    ids = sm["ids"][3:5]
    res = _hits(folder, f"ids:{ids[0]},{ids[1]}")
    want = {(n, t["turn"]): _first_at(t["ids"], ids) for n, r in raw.items() for t in r["turns"]
            if _first_at(t["ids"], ids) is not None}
    assert want and {(Path(h.source).name, h.turn): h.pos for h in res.hits} == want
    q = raw["q000"]["turns"][0]
    pieces = q["pieces"][0:2]
    esc = ",".join('"' + p.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"' for p in pieces)
    res = _hits(folder, f"tokens:{esc}")
    want = {(n, t["turn"]): _first_at(t["pieces"], pieces) for n, r in raw.items() for t in r["turns"]
            if _first_at(t["pieces"], pieces) is not None}
    assert want and {(Path(h.source).name, h.turn): h.pos for h in res.hits} == want
    assert all(h.snippet.hit == (h.pos, h.pos + 2) for h in res.hits)


def test_causes_and_lint_rules_are_the_scan_and_the_linter(built, folder, raw):
    from viewer.drift.corpus import scan_source
    from viewer.lint import lint_source

    causes: dict[tuple[str, int], set[str]] = {}
    for key, src in CAPTURES.items():
        res = scan_source(src, Settings(), workers=1)
        for rec in res["turns"]:
            got = {c.get("cause") for c in (rec["retokenize"], rec["template"], rec["prefix"])
                   if c.get("cause") and not c.get("artefact")} | ({rec["row"]["lost_cause"]} if
                                                                  rec.get("row", {}).get("lost_cause") else set())
            causes[(key, rec["turn"])] = got
    every = sorted({c for v in causes.values() for c in v})
    assert every
    for cause in every:
        want = {(n, t["turn"]) for n, r in raw.items() for t in r["turns"] if cause in causes[(n[0], t["turn"])]}
        assert _turn_set(_hits(folder, f"cause:{cause}")) == want, cause
    linted = lint_source(folder, Settings())
    rules = sorted({h["rule"] for h in linted["hits"]})
    assert rules
    for rule in rules:
        want = {(Path(h["rollout"]).name, h["turn"] if h["turn"] is not None else raw[Path(h["rollout"]).name]
                 ["turns"][0]["turn"]) for h in linted["hits"] if h["rule"] == rule}
        assert _turn_set(_hits(folder, f"lint:{rule}")) == want, rule


def test_lint_and_cause_hits_the_raw_files_decide(built, folder, raw):
    """What the raw files alone decide, without the linter or the drift scan: RI008 (a copy with no
    ``tokenizer/`` folder: a rollout-level hit, on its first agent turn), RI016 (a value <= -1000 on an output
    position that the turns file's mask excludes: the placeholders ``_vary`` wrote), and special-token drift
    where the sampled pieces spell an added token (the tokenizer's own added vocabulary, read by transformers)
    more often than its id was sampled: ``cause:special_token`` holds those turns (it also holds the later
    turns whose prompt re-rendered such a reply, which only the scan's classifier decides)."""
    from transformers import AutoTokenizer

    from viewer.tokenizer.bundled import QWEN3_DIR

    no_tok = {(n, r["turns"][0]["turn"]) for n, r in raw.items() if not (folder / n / "tokenizer").is_dir()}
    assert no_tok and _turn_set(_hits(folder, "lint:RI008")) == no_tok
    placeholders = set()
    for n in raw:
        recs = json.loads((folder / n / "trace.json").read_text())
        for row in json.loads((folder / n / "turns.json").read_text()):
            k = next((i for i, r in enumerate(recs) if r.get("turn") == row["call"] and r.get("kind") == "main"), None)
            pairs = zip(row.get("per_token_logps") or [], row.get("mask") or [])
            if k is not None and any(v is not None and v <= -1000 and not m for v, m in pairs):
                placeholders.add((n, k))
    assert len(placeholders) == 3 * len([i for i in range(COPIES) if i % 7 == 3])
    assert _turn_set(_hits(folder, "lint:RI016")) == placeholders
    added = {"q": AutoTokenizer.from_pretrained(str(QWEN3_DIR)).get_added_vocab(),
             "s": AutoTokenizer.from_pretrained(str(CAPTURES["s"] / "tokenizer")).get_added_vocab()}
    added["o"] = added["q"]  # (capture_ours was recorded from Qwen3-4B: the same vocabulary)
    spelled = {(n, t["turn"]) for n, r in raw.items() for t in r["turns"]
               if any("".join(t["pieces"]).count(text) > t["ids"].count(i) for text, i in added[n[0]].items())}
    assert spelled and spelled <= _turn_set(_hits(folder, "cause:special_token"))


def test_facets_count_the_matching_rollouts_and_click_to_narrow(built, folder, raw):
    res = search(folder, "tool:bash", Settings(), limit=5, build=False)
    names = {n for n, r in raw.items() if any("bash" in t["tools"] for t in r["turns"])}
    models: dict[str, int] = {}
    for n in names:
        models[raw[n]["model"]] = models.get(raw[n]["model"], 0) + 1
    assert dict(res.facets["model"]) == models and res.rollouts == len(names)
    groups = {}
    for n in names:
        groups[raw[n]["group"]] = groups.get(raw[n]["group"], 0) + 1
    assert dict(res.facets["group"]) == dict(sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))[:50])
    assert sum(k for _, _, k in res.reward_hist) == len(names)
    assert sum(k for _, k in res.facets["reward"]) == len(names)
    value, count = res.facets["reward"][0]
    narrowed = search(folder, "tool:bash " + facet_clause("reward", value), Settings(), limit=5, build=False)
    assert narrowed.rollouts == count
    model, count = res.facets["model"][-1]
    assert search(folder, "tool:bash " + facet_clause("model", model), Settings(), build=False).rollouts == count


def test_the_command_line_gives_the_same_hits(built, folder, capsys):
    from viewer.cli import main

    q = "logprob<-12 tool:bash"
    assert main(["search", str(folder), q, "--json", "--limit", "500", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    api = search(folder, q, Settings(), limit=500, build=False)
    assert [(h["source"], h["turn"], h["tok"], h["score"]) for h in doc["hits"]] == \
        [(h.source, h.turn, h.tok, h.score) for h in api.hits]
    assert doc["total"] == api.total and doc["index"]["rebuilt"] == 0


def test_delta_and_ratio_over_a_prime_rl_token_export(tmp_path):
    data = tmp_path / "rank_0.jsonl"
    shutil.copy(PRIME, data)
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    build_index(data, Settings(), workers=1)

    def per_row(f):
        out = {}
        for k, r in enumerate(rows):
            vals = [f(a, b) for a, b, m in zip(r["inference_logprobs"], r["trainer_logprobs"], r["loss_mask"])
                    if m and a is not None and b is not None]
            out[k] = vals
        return out

    delta = per_row(lambda a, b: abs(a - b))
    ratio = per_row(lambda a, b: math.exp(b - a))
    for q, pred, best in (("delta>0.5", lambda v: v > 0.5, max), ("ratio>2", lambda v: v > 2, max),
                          ("ratio<0.5", lambda v: v < 0.5, min)):
        src = ratio if q.startswith("ratio") else delta
        res = search(data, q, Settings(), build=False)
        want = {k for k, vals in src.items() if any(pred(v) for v in vals)}
        assert want and {h.row for h in res.hits} == want, q
        for h in res.hits:
            assert h.score == pytest.approx(best(src[h.row]), rel=1e-5), q
