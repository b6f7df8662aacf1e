"""Every correction method across a dataset, from the per-token parquet a dataset rescore writes
(``python -m viewer rescore … --out FILE.parquet``, or ``rescore-dataset``; schema: :data:`viewer.rescore.dataset.TOKEN_FIELDS`).

Each (rollout, row) of the table is one trainer sequence, its trained tokens in position order, as the
rescore fed them; :func:`viewer.rescore.corrections.correct` runs each method over all of them (the same
code the token view's correction modes use) and :func:`dataset_corrections` gives, per method, the tokens
and sequences kept / clipped / masked, and per pair of methods where they treat a token differently.
The parquet holds no advantage: prime-rl's DPPO masks depend on its sign, so it is a parameter (+1 unless
given). No model runs; no torch, no gradio.
"""
from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from viewer.rescore import corrections as C

__all__ = ["NEEDED", "DATASET_METHODS", "read_sequences", "dataset_corrections"]

NEEDED = ("rollout", "row", "position", "sampler", "trainer")  # the columns read
DATASET_METHODS = ("trl", "verl", "prime_rl_icepop", "prime_rl_dppo")


def read_sequences(path: str | Path) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[tuple[str, int]]]:
    """The parquet's trainer sequences as ``(sampler, trainer, mask)`` rows (float32; a null logprob NaN) and
    each one's (rollout, row). A file that is not a per-token rescore table is refused, naming what is missing."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        schema = pq.read_schema(path)
    except Exception as e:  # not parquet at all (pyarrow's ArrowInvalid / OSError): say which file
        raise ValueError(f"{path.name}: not a parquet file ({type(e).__name__}: {e})") from e
    missing = [c for c in NEEDED if c not in schema.names]
    if missing:
        raise ValueError(f"{path.name}: not a per-token rescore table (no column {', '.join(missing)}); "
                         "write one with `python -m viewer rescore SOURCE --model M --out FILE.parquet`")
    df = pq.read_table(path, columns=list(NEEDED)).to_pandas()
    df = df.sort_values(["rollout", "row", "position"], kind="stable")
    seqs, keys = [], []
    for (rollout, row), g in df.groupby(["rollout", "row"], sort=False, dropna=False):
        s = g["sampler"].to_numpy(dtype=np.float64, na_value=math.nan).astype(np.float32)
        t = g["trainer"].to_numpy(dtype=np.float64, na_value=math.nan).astype(np.float32)
        seqs.append((s, t, np.ones(len(s), bool)))
        keys.append((str(rollout), int(row)))
    return seqs, keys


def dataset_corrections(path: str | Path, params: Mapping[str, Mapping[str, Any]] | None = None,
                        advantage: float = 1.0) -> dict[str, Any]:
    """Per method (:data:`DATASET_METHODS`, parameters ``params[method]`` over each project's defaults):
    ``counts`` (tokens and sequences kept / clipped / masked, :func:`viewer.rescore.corrections.counts`) or
    ``error`` (the project's own refusal); per pair ``"a|b"``: tokens and sequences treated differently."""
    seqs, keys = read_sequences(path)
    params = {m: dict((params or {}).get(m, {})) for m in DATASET_METHODS}
    params["prime_rl_dppo"].setdefault("advantage", advantage)
    out: dict[str, Any] = {"sequences": len(seqs), "tokens": int(sum(len(s) for s, _, _ in seqs)),
                           "rollouts": len({k for k, _ in keys}), "methods": {}, "disagree": {}}
    done: dict[str, C.Correction] = {}
    for m in DATASET_METHODS:
        try:
            done[m] = C.correct(seqs, m, **params[m]) if seqs else None
        except ValueError as e:
            out["methods"][m] = {"params": params[m], "error": str(e)}
            continue
        out["methods"][m] = {"params": {**C.DEFAULTS[m], **params[m]},
                             "counts": C.counts(done[m]) if done[m] is not None else None}
    for a, b in combinations([m for m in DATASET_METHODS if done.get(m) is not None], 2):
        d = C.disagree(done[a], done[b])
        out["disagree"][f"{a}|{b}"] = {"tokens": d["tokens"], "sequences": d["sequences"], "pairs": d["pairs"]}
    return out
