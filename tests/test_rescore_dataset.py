"""A dataset rescore (viewer/rescore/dataset.py, dsummary.py, ray_rescore.py; ``rescore FOLDER``).

The folder is made here from the bundled real captures: three copies of qwen3-tiny with different
rewards and sampler logprobs shifted by hand in their raw ``turns.json`` (so Δ, the ratios and the
reward correlation differ per rollout and some ratios leave TRL's default bounds), one copy of
smollm2 (a second model, ``--model auto``), and one broken capture. Expected values come from the
raw files, a plain ``transformers`` forward, and pandas over the parquet read back; Ray must give
the local run's table and summary exactly.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from requires import need
from viewer.cli import main
from viewer.config import SAMPLE_DIR, Settings

pytestmark = pytest.mark.slow  # torch forward passes (and Ray)
REPO = Path(__file__).resolve().parent.parent
CLI_MD = (REPO / "docs" / "CLI.md").read_text()
MODELS = REPO / ".cache" / "models"
# copy name -> (sample, reward, shift added to the sampler logprob of every third trained token)
COPIES = {"q1": ("qwen3-tiny", 1.0, 0.0), "q2": ("qwen3-tiny", 0.0, 0.3), "q3": ("qwen3-tiny", 0.5, -1.5),
          "s1": ("smollm2", 1.0, 0.0)}


def _need_models():
    from test_rescore_cli import _need

    _need("tiny-qwen3")
    _need("smollm2")


def _make_folder(root: Path) -> Path:
    for name, (sample, reward, shift) in COPIES.items():
        d = root / name
        shutil.copytree(SAMPLE_DIR / sample, d)
        summ = json.loads((d / "summary.json").read_text())
        summ["reward"] = reward
        (d / "summary.json").write_text(json.dumps(summ))
        turns = json.loads((d / "turns.json").read_text())
        for e in turns:
            e["per_token_logps"] = [v + (shift if k % 3 == 0 else 0.0) for k, v in enumerate(e["per_token_logps"])]
        (d / "turns.json").write_text(json.dumps(turns))
    (root / "broken").mkdir()
    (root / "broken" / "trace.json").write_text("{not json")
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    _need_models()
    return _make_folder(tmp_path_factory.mktemp("ds"))


def _opts(**kw):
    from viewer.rescore.dataset import RescoreOptions

    return RescoreOptions(model="auto", dtype="float32", device="cpu", **kw)


@pytest.fixture(scope="module")
def local(folder):
    from viewer.rescore.dataset import rescore_dataset

    seen = []
    res = rescore_dataset(str(folder), Settings(), _opts(), progress=lambda d, t: seen.append((d, t)))
    res["progress"] = seen
    return res


def _doc(res, engine="local", out=None):
    from viewer.cli.rescore_dataset import dataset_doc

    res = {**res, "opts": _opts()}
    doc = dataset_doc(res, Settings(), source="S", engine=engine, model="auto", out=out, seconds=0)
    doc.pop("engine")
    return doc


def test_bad_capture_is_reported_and_the_rest_continue(local, folder):
    assert local["errors"] == [{"source": str(folder / "broken"),
                                "error": local["errors"][0]["error"]}]
    assert "trace.json: line 1, column 2" in local["errors"][0]["error"]
    assert local["rollouts"] == [str(folder / n) for n in sorted(COPIES)]
    assert local["progress"][-1] == (5, 5) and not local["cancelled"]


def test_tokens_are_the_raw_files_and_a_plain_transformers_forward(local, folder):
    """Every trained token of the raw turns.json (mask 1, trl-contract rows), its sampler value as
    written there, and for q1's first row the trainer value of ``model(ids).logits → log_softmax``."""
    import torch
    from transformers import AutoModelForCausalLM

    df = local["table"].to_pandas()
    for name, (sample, _, _) in COPIES.items():
        raw = json.loads((folder / name / "turns.json").read_text())
        mine = df[df.rollout == str(folder / name)]
        want = [v for e in raw for v, m in zip(e["per_token_logps"], e["mask"]) if m]
        assert mine.sampler.tolist() == want, name
        assert set(mine.model) == {json.loads((SAMPLE_DIR / sample / "summary.json").read_text())["model"]}
    raw = json.loads((folder / "q1" / "turns.json").read_text())[0]
    ids = raw["prompt_ids"] + raw["output_ids"]
    model = AutoModelForCausalLM.from_pretrained(str(MODELS / "tiny-qwen3"), dtype=torch.float32).eval()
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    row = df[(df.rollout == str(folder / "q1")) & (df.turn == 1)]
    p = len(raw["prompt_ids"])
    assert row.position.tolist() == [p + k for k, m in enumerate(raw["mask"]) if m]
    assert row.id.tolist() == [ids[i] for i in row.position]
    for i, t in zip(row.position, row.trainer):
        assert t == pytest.approx(lp[i - 1, ids[i]].item(), abs=2e-4)
    assert (row.delta == row.trainer - row.sampler).all()


def _pearson(x, y):
    import numpy as np

    return float(np.corrcoef(x, y)[0, 1])


def test_summary_equals_pandas_over_the_parquet(local, folder, tmp_path):
    """The summary's numbers, recomputed with pandas from the parquet file read back, and the ratio
    columns from TRL's formulas (docs/MISMATCH.md) applied by hand."""
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    pq.write_table(local["table"], tmp_path / "t.parquet")
    df = pd.read_parquet(tmp_path / "t.parquet")
    doc = _doc(local)
    fin = df[np.isfinite(df.delta)]
    t = doc["totals"]
    assert t["tokens"] == len(fin) == t["trained_tokens"] > 0
    assert t["mean_abs_delta"] == pytest.approx(fin.delta.abs().mean(), rel=1e-12)
    assert t["mean_delta"] == pytest.approx(fin.delta.mean(), rel=1e-9, abs=1e-12)
    assert t["max_abs_delta"] == fin.delta.abs().max()
    for q, v in t["ratio_quantiles"].items():
        assert v == pytest.approx(np.exp(fin.delta).quantile(int(q[1:]) / 100), rel=1e-12)
    assert t["flagged"] == int((fin.delta.abs() > Settings().rescore_flag_delta).sum())
    # ratios per mode, by the formulas: clamp / zero exp(Δ) per token, exp(Σ Δ) per row (bounds: none, 3.0)
    r = np.exp(df.delta)
    assert np.allclose(df["ratio.token_truncate"], np.minimum(r, 3.0), rtol=1e-6)
    assert (df["zeroed.token_mask"] == (r > 3.0)).all() and (df["clipped.token_truncate"] == (r > 3.0)).all()
    assert np.allclose(df["ratio.token_mask"], np.where(r > 3.0, 0.0, r), rtol=1e-6)
    seq = np.exp(df.groupby(["rollout", "row"]).delta.transform("sum"))
    assert (df["zeroed.sequence_mask"] == (seq > 3.0)).all()
    assert np.allclose(df["ratio.sequence_truncate"], np.minimum(seq, 3.0), rtol=1e-5)
    for mode, col in (("token_truncate", "clipped.token_truncate"), ("token_mask", "zeroed.token_mask"),
                      ("sequence_truncate", "clipped.sequence_truncate"), ("sequence_mask", "zeroed.sequence_mask")):
        assert t["is"][mode]["changed"] == int(df[col].sum())
    assert t["is"]["token_mask"]["changed"] > 0  # q3's shift of -1.5: exp(1.5 + numerics) > 3
    # q3's rows are zeroed whole in sequence_mask; q1's are not
    assert df[df.rollout == str(folder / "q3")]["zeroed.sequence_mask"].all()
    assert not df[df.rollout == str(folder / "q1")]["zeroed.sequence_mask"].any()
    # per model and per turn
    for key, col in (("by_model", "model"), ("by_turn", "turn")):
        got = {k: (v["tokens"], v["mean_abs_delta"]) for k, v in doc[key].items()}
        want = {str(k): (len(g), g.delta.abs().mean()) for k, g in fin.groupby(col)}
        assert got.keys() == want.keys() and all(got[k][0] == want[k][0] for k in got)
        assert all(got[k][1] == pytest.approx(want[k][1], rel=1e-12) for k in got)
    assert set(doc["by_model"]) == {"tiny-qwen3", "smollm2"}
    # trl-contract: the engine's ids are the trainer's context, so every token is "unchanged"
    assert set(doc["by_context"]) == {"same"} and doc["drift"]["changed"]["tokens"] == 0
    assert doc["drift"]["unchanged"]["tokens"] == len(fin)
    # reward: per rollout mean |Δ| (and mean Δ) against its reward
    per = fin.groupby("rollout").agg(mad=("delta", lambda d: d.abs().mean()), md=("delta", "mean"),
                                     reward=("reward", "first"))
    w = doc["reward"]
    assert w["rollouts"] == 4  # Spearman's rho: Pearson of average ranks (pandas' rank; no scipy here)
    assert w["pearson_mean_abs_delta"] == pytest.approx(per.mad.corr(per.reward), rel=1e-9)
    assert w["spearman_mean_abs_delta"] == pytest.approx(per.mad.rank().corr(per.reward.rank()), rel=1e-9)
    assert w["pearson_mean_delta"] == pytest.approx(per.md.corr(per.reward), rel=1e-9)


def test_realign_contexts_against_unchanged_ones(folder):
    """trl-message re-renders the prompt: its REALIGN turns' contexts are not the engine's, and the
    summary's drift block says so (the tokens counted from the table)."""
    from viewer.rescore.dataset import rescore_dataset

    res = rescore_dataset(str(folder), Settings(), _opts(trainer="trl-message"), limit=2)
    df = res["table"].to_pandas()
    doc = _doc(res)
    assert set(df.verdict) == {"REALIGN"} and set(df.context) == {"changed"}
    assert doc["drift"]["changed"]["tokens"] == len(df) > 0 and doc["drift"]["unchanged"]["tokens"] == 0
    assert doc["trainers"] == {"trl-message/tool-calls": 2} and doc["rollouts"]["failed"] == 1


def test_cancel_after_n_rollouts_keeps_n(folder):
    from viewer.rescore.dataset import rescore_dataset

    cancel = threading.Event()

    def progress(done, total):
        if done >= 3:  # broken (an error), q1, q2: then Cancel
            cancel.set()

    res = rescore_dataset(str(folder), Settings(), _opts(), progress=progress, cancel=cancel)
    assert res["cancelled"] and res["rollouts"] == [str(folder / "q1"), str(folder / "q2")]
    assert set(res["table"].to_pandas().rollout) == set(res["rollouts"])
    doc = _doc(res)
    assert doc["partial"] is True and doc["rollouts"]["rescored"] == 2
    assert doc["notes"] == ["partial: cancelled after 2 rescored rollout(s) of 5"]


@pytest.fixture(scope="module")
def ray_mod():
    try:
        import ray.data  # noqa: F401
    except ImportError:
        need("ray[data] (requirements-scale.txt)", "the ray engine")
    from viewer.rescore import ray_rescore

    return ray_rescore


def test_ray_equals_local(ray_mod, local, folder):
    """Acceptance: the folder rescored on a local Ray (2 workers) gives the local run's table, row for
    row, and the same summary; no Ray process is left behind."""
    from test_ray_engine import _descendants, _no_ray_children

    before = _descendants(os.getpid())
    seen = []
    res = ray_mod.rescore_with_ray(str(folder), Settings(ray_num_cpus=2, ray_workers=2), _opts(),
                                   progress=lambda d, t: seen.append((d, t)))
    assert _no_ray_children(before) == set()
    assert res["table"].equals(local["table"])
    assert _doc(res) == _doc(local)
    assert seen[-1] == (5, 5) and res["errors"] == local["errors"]


def _contract_rows() -> list[dict]:
    """A dataset with trainer rows: capture-contract rows (docs/FORMATS.md §2.6) made from the raw
    qwen3-tiny turns, one agent call per row."""
    raw = json.loads((SAMPLE_DIR / "qwen3-tiny" / "turns.json").read_text())
    return [{"prompt_token_ids": e["prompt_ids"], "completion_token_ids": e["output_ids"],
             "per_token_logps": e["per_token_logps"],
             "loss_mask": [0] * len(e["prompt_ids"]) + [1] * len(e["output_ids"]),
             "metadata": json.dumps({"model": "tiny-qwen3", "node_id": f"n{i}"})} for i, e in enumerate(raw)]


def test_parquet_dataset_with_trainer_rows_on_ray_equals_local(ray_mod, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from viewer.rescore.dataset import rescore_dataset

    _need_models()
    rows = _contract_rows()
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1)  # 3 row groups: 3 Ray blocks
    # one actor: the subject is row groups as blocks and trainer rows; blocks coming back from two actors
    # in any order is test_ray_equals_local's. A second actor here cost 7-9 CPU s (torch imported and the
    # model loaded once more; docs/SPEED.md, "Ray tests").
    settings = Settings(ray_num_cpus=2, ray_workers=1)
    local = rescore_dataset(str(path), settings, _opts())
    res = ray_mod.rescore_with_ray(str(path), settings, _opts())
    assert res["table"].equals(local["table"]) and _doc(res) == _doc(local)
    df = local["table"].to_pandas()
    assert len(local["rollouts"]) == 3 and set(df.model) == {"tiny-qwen3"}
    assert df.sampler.tolist() == [v for e in rows for v in e["per_token_logps"]]  # every completion token


# the CLI ------------------------------------------------------------------------------------------------

def _documented_dataset_keys() -> list[str]:
    import re

    section = CLI_MD.split("### `rescore --json`", 1)[1]
    return re.findall(r"`([a-z_]+)`", re.search(r"^Over a dataset, top-level keys: (.*)\.$", section, re.M).group(1))


def test_cli_json_and_parquet(folder, local, tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "t.parquet"
    code = main(["rescore", str(folder), "--model", "auto", "--dtype", "float32", "--device", "cpu", "--out",
                 str(out), "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 0 and list(doc) == _documented_dataset_keys()
    assert pq.read_table(out).equals(local["table"])
    want = _doc(local, out=str(out))
    assert {k: v for k, v in doc.items() if k not in ("engine", "seconds", "source")} == \
           {k: v for k, v in want.items() if k not in ("seconds", "source")}
    assert captured.err.splitlines()[-1] == "rescored 5/5 rollouts"
    code = main(["rescore", str(folder), "--model", "auto", "--dtype", "float32", "--limit", "2", "--quiet"])
    text = capsys.readouterr().out
    assert code == 0 and "2 rescored, 1 failed" in text and "by turn:" in text and "failed:     " in text


def test_cli_errors(tmp_path, capsys, folder):
    (tmp_path / "only" / "broken").mkdir(parents=True)
    (tmp_path / "only" / "broken" / "trace.json").write_text("{not json")
    (tmp_path / "only" / "other").mkdir()
    (tmp_path / "only" / "other" / "trace.json").write_text("[]")
    for argv, needle in ((["rescore", str(tmp_path / "only"), "--model", "auto"], "no rollout could be rescored"),
                         (["rescore", str(folder), "--model", str(tmp_path), "--limit", "1"], "config.json"),
                         (["rescore", str(folder), "--model", "auto", "--limit", "0"], "--limit must be at least 1")):
        assert main(argv + ["--quiet"]) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_ctrl_c_cancels_once_then_stops():
    """The CLI's SIGINT handler: the first Ctrl-C sets Cancel (the run keeps what it finished), the
    second raises KeyboardInterrupt; Python's handler is back afterwards."""
    from viewer.cli.rescore_dataset import _CtrlC

    cancel = threading.Event()
    before = signal.getsignal(signal.SIGINT)
    with _CtrlC(cancel):
        os.kill(os.getpid(), signal.SIGINT)
        assert cancel.wait(10)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes of this thread
                math.sqrt(2)
    assert signal.getsignal(signal.SIGINT) is before


def test_ray_equals_local_in_bf16(ray_mod, tmp_path):
    """SmolLM2 in its own dtype (bf16): a CPU forward rounds differently with another torch thread
    count, and Ray's actors once ran with one thread (Ray's default for a 1-CPU actor): their table
    differed from the local run's in every token. They now take the driver's count."""
    import torch

    from viewer.rescore.dataset import RescoreOptions, rescore_dataset

    _need_models()
    shutil.copytree(SAMPLE_DIR / "smollm2", tmp_path / "ds" / "s1")
    opts = RescoreOptions(model="smollm2", device="cpu", dtype="auto")
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # as on this 2-core machine; a 1-CPU Ray actor would run 1
    try:
        local = rescore_dataset(str(tmp_path / "ds"), Settings(), opts)
        res = ray_mod.rescore_with_ray(str(tmp_path / "ds"), Settings(ray_num_cpus=2, ray_workers=2), opts)
    finally:
        torch.set_num_threads(before)
    assert local["table"].num_rows == 256 and set(local["table"].column("trainer_model").to_pylist()) == {"smollm2"}
    assert res["table"].equals(local["table"])


def test_a_model_that_will_not_load_is_tried_once_and_said_once(tmp_path, capsys, monkeypatch):
    """Issue 41, point 2: offline, `--model auto` over a folder retried the Hub for a model it could not have,
    once per rollout (10 minutes for 24 rollouts), and printed a three-line error for each. Now the model is
    tried once a run and the text output says it in one line. Three copies of the sample naming a model that
    is in no cache (their raw summary.json and trace.json edited here); HF_HUB_OFFLINE=1, transformers' real
    loader, its calls counted."""
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch (requirements-rescore.txt)", "a rescore's forward pass")
    _need_models()
    import transformers

    names = ["a", "b", "c"]
    for n in names:
        cap = shutil.copytree(SAMPLE_DIR / "qwen3-tiny", tmp_path / "f" / n)
        for f in ("summary.json", "trace.json"):
            text = (cap / f).read_text()
            (cap / f).write_text(text.replace('"tiny-qwen3"', '"ri-test-nobody/not-in-any-cache"'))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__
    calls = []

    def counted(cls, ref, *a, **kw):
        calls.append(ref)
        return real(cls, ref, *a, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    assert main(["rescore", str(tmp_path / "f"), "--model", "auto", "--quiet", "--json"]) == 2
    _, err = capsys.readouterr()
    assert calls == ["ri-test-nobody/not-in-any-cache"], calls
    assert err.startswith("error: ") and err.count("\n") == 1, err  # nothing rescored: one line

    (tmp_path / "f" / "ok").mkdir()
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", tmp_path / "f" / "ok" / "cap")  # one that loads: the run ends
    assert main(["rescore", str(tmp_path / "f"), "--model", "auto", "--quiet"]) == 0
    out, _ = capsys.readouterr()
    failed = [x for x in out.splitlines() if x.startswith("failed:")]
    assert len(failed) == 1 and "3 rollouts" in failed[0] and "ri-test-nobody/not-in-any-cache" in failed[0], out
    assert calls.count("ri-test-nobody/not-in-any-cache") == 2, calls  # once more: the second run's one try
