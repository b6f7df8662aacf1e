"""Every real file against every reader's detector (issue 35): a reader that accepts a file must read it
right or say why. It fails when an accepting reader yields a rollout with zero turns, zero tokens on a file
that carries ids, or fewer rollouts than the file holds, without a problem saying so.

The files are the producers' own (``tests/data/realworld/*/``, ``../shared/realdata``; origins in each
SOURCES.md). What a file holds is counted here from the raw bytes with ``json`` / ``zipfile``, per producer,
never through our readers; the stored rows the detectors see come from the container layer (lines, a JSON
document, a zip), which knows no format.
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from viewer.sources import SourceError, open_dataset
from viewer.sources.registry import all_formats
from viewer.sources.rowdata import RowReadError, data_kind, local_dataset, sniff_kind

HERE = Path(__file__).resolve().parent
REAL = HERE / "data" / "realworld"
SHARED = HERE.parent.parent / "shared" / "realdata"
_IDS = re.compile(rb'"(prompt_token_ids|generation_token_ids|completion_token_ids|token_ids|tokens|input_ids)"'
                  rb'\s*:\s*\[\s*\[?\s*\d')
READ_AT_MOST = 4  # rollouts read per (file, accepting format): the producers' own tests read every one


def _lines(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]


def raw_rollouts(p: Path) -> int:
    """How many rollouts the file holds, by its producer's layout, from the raw bytes."""
    where = p.relative_to(REAL).parts[0] if p.is_relative_to(REAL) else "shared"
    if where == "atropos":  # a line is a group of G sequences
        return sum(len(r["tokens"]) for r in _lines(p))
    if where == "inspect":  # a log holds samples: .json under "samples", .eval as samples/*.json members
        if p.suffix == ".eval":
            with zipfile.ZipFile(p) as z:
                return len({n for n in z.namelist() if n.startswith("samples/") and n.endswith(".json")})
        return len(json.loads(p.read_text()).get("samples") or [])
    if where in ("swe_agent", "mini_swe_agent"):  # one trajectory per file; a run's preds.json holds patches only
        return 0 if p.name in ("preds.json", "all_preds.jsonl") else 1
    if where == "openhands":  # output.jsonl: a row per instance; an event list: one rollout
        return len(_lines(p)) if p.suffix == ".jsonl" else 1
    if where == "nemo_gym":  # a line per rollout; the materialised task inputs hold none
        return 0 if "materialized_inputs" in p.name else len(_lines(p))
    if where == "verifiers":  # results.jsonl: a line per rollout; metadata.json: none
        return len(_lines(p)) if p.name == "results.jsonl" else 0
    if where == "tau_bench":  # a JSON list of results
        return len(json.loads(p.read_text()))
    if where == "prime_rl":  # a line per exported sequence
        return len(_lines(p))
    doc = json.loads(p.read_text())  # ../shared/realdata
    if p.name.endswith(".traces.json"):  # Harbor's exported rows
        return len(doc)
    if p.name.endswith(".trajectory.json") or p.name == "messages-after-2.json":  # one ATIF / opencode session
        return 1
    return 0  # session-details.json: a session's info, no conversation


def _real_files() -> list[Path]:
    files = [p for p in sorted(REAL.rglob("*")) if p.is_file() and (data_kind(p.name) or p.suffix == ".eval")]
    if SHARED.exists():
        files += [p for p in sorted(SHARED.rglob("*")) if p.is_file() and data_kind(p.name)]
    return files


def _name(p: Path) -> str:
    return str(p.relative_to(REAL) if p.is_relative_to(REAL) else Path("shared") / p.relative_to(SHARED))


FILES = _real_files()


def _first_stored_row(p: Path) -> dict | None:
    """What a detector sees: the container's first stored row (a line, a JSON row, a zip log), no format."""
    kind = data_kind(p.name) or sniff_kind(p)
    ds = local_dataset([str(p)], str(p.parent), str(p), kinds={str(p): kind})
    try:
        first = ds.read_rows([0])[0][1] if ds.count(ds.files[0]) else None
    except RowReadError:
        return None
    return first if isinstance(first, dict) else None


def test_the_real_files_are_here():
    """Every producer of issue 35 has at least two real files (SOURCES.md beside them)."""
    for producer in ("nemo_gym", "atropos", "prime_rl", "verifiers", "inspect", "openhands", "swe_agent",
                     "mini_swe_agent", "tau_bench"):
        d = REAL / producer
        assert (d / "SOURCES.md").is_file(), producer
        assert sum(1 for p in FILES if p.is_relative_to(d)) >= 2, producer


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_every_reader_that_accepts_a_real_file_reads_it_or_says_why(path):
    first = _first_stored_row(path)
    expected = raw_rollouts(path)
    has_ids = _IDS.search(path.read_bytes()) is not None if path.suffix != ".eval" else False
    accepted = [f for f in all_formats() if first is not None and f.detect(set(first), first)]
    if expected:
        assert accepted, f"{_name(path)}: {expected} rollout(s), and no reader accepts it"
    for fmt in accepted:
        try:
            src = open_dataset(path, format=fmt.name)
        except SourceError:
            continue  # refused as a whole, by name: said
        n = len(src.dataset)
        assert n >= expected, f"{fmt.name} reads {n} rollout(s) of {_name(path)}, which holds {expected}"
        for r in range(min(n, READ_AT_MOST)):
            try:
                ro = src.rollout(r)
            except SourceError:
                continue  # this rollout refused by name: said
            said = [p for p in ro.problems if p.severity == "error"] or ro.problems
            if not ro.turns:
                assert said, f"{fmt.name}: {_name(path)} row {r}: no turn, and no problem says why"
            elif has_ids:
                tokens = sum(len(t.prompt_ids) + len(t.output_ids) for t in ro.turns)
                assert tokens or said, f"{fmt.name}: {_name(path)} row {r}: the file has ids, 0 tokens read"
            if not expected:
                assert said, f"{fmt.name} reads {_name(path)}, which holds no rollout, without a word"


OWN = {"nemo_gym": "nemo-gym", "atropos": "atropos", "prime_rl": "prime-rl-tokens", "verifiers": "verifiers",
       "inspect": "inspect", "openhands": "openhands", "swe_agent": "swe-agent", "mini_swe_agent": "mini-swe-agent",
       "tau_bench": "tau-bench"}


def test_each_producers_files_are_taken_by_its_own_reader_first():
    """Auto-detection picks the producer's reader for each of its files."""
    for path in FILES:
        if not path.is_relative_to(REAL) or not raw_rollouts(path):
            continue
        want = OWN[path.relative_to(REAL).parts[0]]
        first = _first_stored_row(path)
        if first is None:  # a log whose first stored row fails is refused by name (its own tests)
            continue
        got = [f.name for f in all_formats() if f.detect(set(first), first)]
        assert got[:1] == [want], f"{_name(path)}: detected {got}, want {want} first"


def test_no_producers_reader_accepts_another_producers_file():
    """A producer's detector is strict: it accepts none of the other producers' files, nor the older
    formats' real files (Harbor, ATIF, opencode); the generic ``messages`` may stand beside one."""
    for path in FILES:
        first = _first_stored_row(path)
        if first is None:
            continue
        mine = OWN.get(path.relative_to(REAL).parts[0]) if path.is_relative_to(REAL) else None
        others = [f.name for f in all_formats() if f.name in OWN.values() and f.name != mine
                  and f.detect(set(first), first)]
        assert others == [], f"{_name(path)} is accepted by {others}"
