"""Attacks on the search (issue 38): a visitor's query must not read a file or a URL, and must stay bounded in
time, rows and memory (viewer/search/engine.py). Real captures copied into a folder, indexed by the drift
scan; for the time and row bounds, that index replicated to a few thousand rollouts (bench/bench_search.py's
``replicate``)."""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import duckdb
import pytest

from viewer.config import CACHE_DIR, SAMPLE_DIR, Settings
from viewer.search import PUBLIC, Bounds, QueryError, build_index, index_path, search
from viewer.search.engine import Engine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_search import replicate  # noqa: E402

CAPTURES = (REPO / "sample_data" / "qwen3-tiny", REPO / "sample_data" / "smollm2", REPO / "tests" / "data" / "capture_ours")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("visitor") / "runs"
    for i in range(2):
        for src in CAPTURES:
            shutil.copytree(src, root / f"{src.name}-{i}")
    _plant(root / "capture_ours-1", "a" * 60 + "c")  # what a backtracking engine takes exponential time over
    return root


def _plant(cap: Path, text: str) -> None:
    """Put ``text`` in the user's message of the capture's first agent turn (its trace, as a visitor's upload could)."""
    p = cap / "trace.json"
    recs = json.loads(p.read_text())
    first = next(r for r in recs if r.get("kind") == "main")
    first["request"]["messages"][-1]["content"] = text
    p.write_text(json.dumps(recs))


@pytest.fixture(scope="module")
def info(folder):
    return build_index(folder, Settings(), workers=1, index_dir=folder.parent / "ix")


@pytest.fixture(scope="module")
def big(info, tmp_path_factory):
    """The index replicated 500 times: 3,000 rollouts, ~10,000 turns."""
    return replicate(info, 500, tmp_path_factory.mktemp("big") / "ix")


def _public(folder, q, **kw):
    return search(folder, q, Settings(), public=True, build=False, index_dir=kw.pop("index_dir"), **kw)


@pytest.mark.parametrize("q", [
    "read_csv('/etc/passwd')",
    "\"') UNION SELECT * FROM read_csv('/etc/passwd') --\"",
    "model:\"x') OR 1=1; COPY (SELECT 1) TO '{out}'; --\"",
    "/.*/ OR tokens:\"'); ATTACH '{out}' AS x; --\"",
    '"root:x:0:0"',
])
def test_a_query_never_reads_or_writes_a_file(folder, info, tmp_path, q):
    out = tmp_path / "pwned.csv"
    res = _public(folder, q.format(out=out), index_dir=info.path, limit=500)
    assert not out.exists()
    assert all("root:x:0:0" not in ((h.snippet.text or "") if h.snippet else "") for h in res.hits)
    shown = str([h.to_dict() for h in res.hits]) + str(res.facets)
    assert "root:" not in shown  # /etc/passwd's first line is root's, everywhere


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('https://huggingface.co/robots.txt')",
    "SELECT * FROM read_text('{meta}')",  # a file beside the index's own: only those two files may be read
    "COPY (SELECT 1) TO '{out}'",
    "ATTACH '{out}' AS x",
    "INSTALL httpfs",
    "SET enable_external_access = true",
    "SET memory_limit = '64GB'",
    "RESET lock_configuration",
])
def test_the_engine_itself_refuses_files_urls_and_settings(info, tmp_path, sql):
    """Even SQL the syntax never writes is refused by the connection the search runs on."""
    with Engine(info.files, PUBLIC) as eng:
        with pytest.raises(duckdb.Error):
            eng.con.execute(sql.format(meta=info.path / "meta.json", out=tmp_path / "x.db"))
        assert eng.rows("SELECT count(*) FROM rollouts", {})[0][0] == info.rollouts  # its own files still read
    assert not (tmp_path / "x.db").exists()


def test_the_public_engine_is_bounded_in_memory_and_threads(info):
    with Engine(info.files, PUBLIC) as eng:
        mem, threads, ext = eng.rows("SELECT current_setting('memory_limit'), current_setting('threads'), "
                                     "current_setting('enable_external_access')", {})[0]
    assert threads == PUBLIC.threads and ext is False
    assert mem.endswith("MiB") and float(mem.split()[0]) <= PUBLIC.memory_mb


@pytest.mark.parametrize("q, needle", [
    ("/(a)\\1/", "could not run"),  # a backreference: RE2 has none (so no catastrophic backtracking either)
    ("/" + "a" * 300 + "/", "at most 200"),
    ("/((((((((((a{1,100}){1,100}){1,100}){1,100}){1,100}))))))/", "could not run"),  # a compiled-size bomb
    ("x" * 2100, "at most 2000"),
    (" OR ".join(f"tool:t{i}" for i in range(40)), "at most 32 terms"),
    ("ids:" + ",".join(["1"] * 40), "1 to 32"),
    ("reward<", "a comparison"),
    ("nosuch:thing", "unknown field"),
    ("(tool:bash", "not closed"),
])
def test_a_hostile_query_is_refused_with_a_clear_error(folder, info, q, needle):
    t = time.perf_counter()
    with pytest.raises(QueryError) as e:
        _public(folder, q, index_dir=info.path)
    assert needle in e.value.message and time.perf_counter() - t < 5


def test_a_regex_that_backtracks_elsewhere_runs_in_linear_time(folder, info, big):
    """``(a+)+b`` over sixty a's: a backtracking engine (Python's re) tries 2^60 ways; RE2 (DuckDB's) is linear,
    and the snippet is cut where RE2 matched, never re-matched in Python."""
    t = time.perf_counter()
    res = _public(folder, "/(a+)+b|ac/", index_dir=info.path)
    assert time.perf_counter() - t < PUBLIC.seconds
    planted = [h for h in res.hits if Path(h.source).name == "capture_ours-1"]
    assert planted and "a" * 59 + "c" in planted[0].snippet.text
    t = time.perf_counter()
    _public(folder, "/(a+)+$/ OR /(x+x+)+y/ OR /(.*a){12}/", index_dir=big)
    assert time.perf_counter() - t < PUBLIC.seconds


def test_a_search_that_runs_long_is_stopped(folder, big):
    q = " OR ".join(f"/(?i)\\w*{c}\\w*\\s+\\w+\\s+\\w+q/" for c in "abcdefghijklmnop") + " OR tool:bash"
    t = time.perf_counter()
    slow = search(folder, q, Settings(), build=False, index_dir=big, facets=True)
    took = time.perf_counter() - t
    bound = Bounds(seconds=took / 8, max_hits=500, memory_mb=192, threads=1)
    t = time.perf_counter()
    with pytest.raises(QueryError) as e:
        search(folder, q, Settings(), build=False, index_dir=big, bounds=bound)
    assert "took longer than" in e.value.message and slow.total > 0
    assert time.perf_counter() - t < took / 8 + 1.0  # stopped at its bound, not run to the end


def test_a_search_cannot_return_too_many_rows(folder, big):
    with pytest.raises(QueryError) as e:
        _public(folder, "tool:bash", index_dir=big, limit=PUBLIC.max_hits + 1)
    assert f"at most {PUBLIC.max_hits} hits" in e.value.message
    res = _public(folder, "tool:bash", index_dir=big, limit=PUBLIC.max_hits)
    assert len(res.hits) == PUBLIC.max_hits < res.total  # counted in full, listed up to the cap
    assert all(len(v) <= PUBLIC.facet_values for v in res.facets.values())


def test_a_public_index_is_kept_in_the_cache_not_beside_the_visitors_data(folder, monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert index_path(folder, Settings()) == folder / ".rollout-inspector" / "index"
    assert index_path(folder, Settings(public=True)).is_relative_to(CACHE_DIR)
    assert index_path("hf://datasets/a/b", Settings()).is_relative_to(CACHE_DIR)
    assert index_path(SAMPLE_DIR / "qwen3-tiny", Settings()).is_relative_to(CACHE_DIR)  # never inside the package
