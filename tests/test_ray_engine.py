"""viewer.drift.ray_engine: the drift scan on a local Ray (2 CPUs) gives the local engine's totals, writes
queryable per-turn parquet, and leaves no Ray process behind."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from _row_fixtures import harbor_rows
from _scan_keys import assert_scan_keys
from requires import need
from viewer.config import SAMPLE_DIR, Settings
from viewer.drift.corpus import scan_source

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_mod():
    try:
        import ray.data  # noqa: F401
    except ImportError:
        need("ray[data] (requirements-scale.txt)", "the ray engine of the drift scan")
    from viewer.drift import ray_engine

    return ray_engine


def _descendants(pid: int) -> set[int]:
    """Processes below ``pid`` (from /proc; Ray's gcs_server, raylet and workers are the driver's)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p and c not in out:
                out.add(c)
                todo.append(c)
    return out


def _is_ray(pid: int) -> bool:
    """gcs_server, raylet, ray workers ("ray::..."), the dashboard agent: all name ray in their command."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "ray" in cmd.lower()


def _no_ray_children(before: set[int]) -> set[int]:
    # only Ray's processes count: other fixtures (chromium, the app) may start children meanwhile
    for _ in range(40):  # shutdown signals them; give them a moment to exit
        left = {p for p in _descendants(os.getpid()) - before if _is_ray(p)}
        if not left:
            return left
        time.sleep(0.25)
    return left


def _rows(table):
    return sorted(table.to_pylist(), key=lambda r: (r["rollout"], r["turn"]))


def _same_totals(ray_res, local_res):
    a, b = dict(ray_res["totals"]), dict(local_res["totals"])
    assert a == b
    for k in ("mode", "train_turns", "errors", "tally", "modes"):
        assert ray_res["trainer"][k] == local_res["trainer"][k]


def test_bundled_samples_on_ray_equal_the_local_scan(ray_mod, tmp_path):
    import pyarrow.parquet as pq

    from viewer.drift.scanout import turns_table

    settings = Settings(ray_num_cpus=2, ray_workers=2)
    local = scan_source(str(SAMPLE_DIR), settings)
    before = _descendants(os.getpid())
    seen = []
    res = ray_mod.scan_with_ray(str(SAMPLE_DIR), settings, out=tmp_path / "scan.parquet",
                                progress=lambda d, t: seen.append((d, t)))
    assert _no_ray_children(before) == set(), "Ray processes left running after the scan"
    assert local["totals"]["turns"] > 0 and local["totals"]["rollouts"] == 2
    _same_totals(res, local)
    # both engines write exactly the keys viewer/drift/results.py defines, and the same ones
    assert assert_scan_keys(res) == assert_scan_keys(local)
    assert seen and seen[-1] == (2, 2)
    # the parquet file holds one row per turn, the same rows the local scan's records give
    table = pq.read_table(tmp_path / "scan.parquet")
    assert table.num_rows == local["totals"]["turns"]
    assert _rows(table) == _rows(turns_table(local["turns"]))
    df = table.to_pandas()  # queryable as a plain frame
    assert int(df["drifted"].sum()) == local["totals"]["drifted_turns"]
    assert int((df["retokenize.equal"] == False).sum()) == local["totals"]["retokenize_drifted"]  # noqa: E712


def test_realdata_parquet_row_groups_on_ray_equal_the_local_scan(ray_mod, tmp_path, realdata):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = harbor_rows() + harbor_rows("openhands__hello-world")
    path = tmp_path / "harbor.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)  # 6 rows -> 3 row groups -> 3 blocks
    settings = Settings(ray_num_cpus=2, ray_workers=2)
    blocks = ray_mod.plan_blocks(str(path), settings)
    assert [b["rows"] for b in blocks] == [[0, 1], [2, 3], [4, 5]]
    local = scan_source(str(path), settings)
    before = _descendants(os.getpid())
    res = ray_mod.scan_with_ray(str(path), settings)
    assert _no_ray_children(before) == set()
    assert local["totals"]["rollouts"] == 6 and local["totals"]["turns"] > 0
    _same_totals(res, local)
    from viewer.drift.scanout import turns_table

    assert assert_scan_keys(res) == assert_scan_keys(local)
    got, want = _rows(turns_table(res["turns"])), _rows(turns_table(local["turns"]))
    assert got == want, [(g, w) for g, w in zip(got, want) if g != w][:2]


def test_cli_engine_ray_writes_parquet(ray_mod, tmp_path, capsys):
    import json

    from viewer.cli import main

    out = tmp_path / "t.parquet"
    rc = main(["drift", str(SAMPLE_DIR / "qwen3-tiny"), "--engine", "ray", "--out", str(out), "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["engine"] == "ray" and doc["out"] == str(out)
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == doc["totals"]["turns"] > 0
