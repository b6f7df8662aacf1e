"""A night of captures for the tests of issue 38: 40 varied copies of the two bundled real captures.

Each copy keeps 2, 3 or all of its model calls (trace.json and turns.json cut alike) and gets its own reward in
summary.json; :func:`raw_row` reads a copy's expected figures back with plain ``json``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = {"q": REPO / "sample_data" / "qwen3-tiny", "s": REPO / "sample_data" / "smollm2"}
N = 40


def make_night(root: Path, n: int = N) -> Path:
    """``root/night``: ``n`` varied copies of the bundled captures (q00, s01, q02, ...)."""
    night = root / "night"
    night.mkdir()
    for i in range(n):
        kind = "qs"[i % 2]
        dst = night / f"{kind}{i:02d}"
        shutil.copytree(SAMPLES[kind], dst)
        trace = json.loads((dst / "trace.json").read_text())
        keep = len(trace) - (i % 3)  # drop 0, 1 or 2 of the last calls: 2-4 calls, 1-3 agent turns
        if keep < len(trace):
            (dst / "trace.json").write_text(json.dumps(trace[:keep]))
            turns = json.loads((dst / "turns.json").read_text())
            calls = {r["turn"] for r in trace[:keep]}
            (dst / "turns.json").write_text(json.dumps([t for t in turns if t["call"] in calls]))
            (dst / "proxy_trace.jsonl").unlink()  # it holds every call too: gone, so the cut trace is what is read
        summ = json.loads((dst / "summary.json").read_text())
        summ["reward"] = round(((i * 7) % N) / N, 3)
        (dst / "summary.json").write_text(json.dumps(summ))
    return night


def raw_row(folder: Path) -> dict:
    turns = json.loads((folder / "turns.json").read_text())
    summ = json.loads((folder / "summary.json").read_text())
    task = json.loads((folder / "task.json").read_text())
    return {"rollout": folder.name, "turns": len(turns), "reward": summ["reward"], "model": summ["model"],
            "tokens": sum(len(t["prompt_ids"]) + len(t["output_ids"]) for t in turns),
            "task": " ".join(task["instruction"].split())[:120]}
