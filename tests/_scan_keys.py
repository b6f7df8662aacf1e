"""The keys a drift scan result may and must carry, read from its definition (viewer/drift/results.py),
checked on what an engine actually returned."""
from __future__ import annotations

from typing import Any, get_type_hints

from viewer.drift import results as R


def _keys(td) -> tuple[set[str], set[str]]:
    return set(td.__required_keys__), set(td.__required_keys__ | td.__optional_keys__)


def assert_record_keys(rec: dict[str, Any]) -> None:
    need, may = _keys(R.TurnRecord)
    assert need <= set(rec) <= may, (sorted(set(rec) ^ need), rec)
    hints = get_type_hints(R.TurnRecord)
    for sec in R.SECTIONS:
        if sec in rec:
            need, may = _keys(hints[sec])
            assert need <= set(rec[sec]) <= may, (sec, sorted(set(rec[sec]) - may), sorted(need - set(rec[sec])))


def assert_scan_keys(res: dict[str, Any]) -> set[str]:
    """Every key of ``res`` is in the definition and every required one is there; returns the
    ``section.key`` names seen over all turns (what a caller may compare between engines)."""
    need, may = _keys(R.ScanResult)
    assert need <= set(res) <= may, sorted(set(res) - may)
    assert set(res["totals"]) == set(R.ScanTotals.__annotations__)
    assert set(res["totals"]["unchecked_by_check"]) == set(R.CHECKS)
    assert set(res["trainer"]) == set(R.TrainerBlock.__annotations__)
    assert set(res["trainer"]["tally"]) == set(R.TrainerTally.__annotations__)
    for e in res.get("errors", []):
        assert set(e) == set(R.ScanError.__annotations__)
    for t in res.get("tokenizers", []):
        assert set(t) == set(R.TokenizerUsed.__annotations__)
    seen = set()
    for rec in res["turns"]:
        assert_record_keys(rec)
        seen |= {k for k in rec if k not in R.SECTIONS}
        seen |= {f"{s}.{k}" for s in R.SECTIONS for k in rec.get(s, {})}
    return seen
