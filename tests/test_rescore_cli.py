"""``python -m viewer rescore``: the bundled SmolLM2 sample against the same weights gives a small Δ."""
import json

import pytest

from requires import need
from viewer.cli import main
from viewer.config import REPO_ROOT

SMOL = REPO_ROOT / "sample_data" / "smollm2"


def _need(name: str):
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch", "requirements-rescore.txt, installed by scripts/setup.sh")
    _build(name)


@pytest.mark.slow
def test_smollm2_sample_same_weights_small_delta(capsys):
    _need("smollm2")
    assert main(["rescore", str(SMOL), "--model", "smollm2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == "smollm2" and doc["device"] in ("cpu", "cuda") and doc["dtype"] == "bfloat16"
    raw = json.loads((SMOL / "turns.json").read_text())
    # every mask-1 token of the capture contract is rescored (the summary says trl-contract is chosen)
    assert doc["trainer"]["mode"] == "trl-contract"
    assert doc["totals"]["tokens"] == sum(sum(e["mask"]) for e in raw)
    assert [t["turn"] for t in doc["turns"]] == [i + 1 for i, e in enumerate(raw) if any(e["mask"])]
    # same weights, bf16 on both sides: numerics only, well under a tenth of a nat on average
    assert 0 < doc["totals"]["mean_abs_delta"] < 0.1
    assert all(t["context"] == "same" for t in doc["turns"])
    assert doc["totals"]["flagged"] == sum(t["flagged"] for t in doc["turns"])
    assert doc["totals"]["ratio_min"] <= 1 <= doc["totals"]["ratio_max"]


@pytest.mark.slow  # a torch forward pass
def test_table_output_and_threshold(capsys):
    _need("tiny-qwen3")
    src = REPO_ROOT / "sample_data" / "qwen3-tiny"
    assert main(["rescore", str(src), "--model", "tiny-qwen3", "--dtype", "float32", "--threshold", "0"]) == 0
    out = capsys.readouterr().out
    assert "mean_abs_delta" in out and "totals:" in out and "(|Δ| > 0.0)" in out
    assert main(["rescore", str(src), "--model", "tiny-qwen3", "--dtype", "float32", "--threshold", "0",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # threshold 0: every nonzero Δ is flagged, and only those. A trained token whose recomputed logprob equals the
    # recorded one exactly has Δ 0 (one of 242 here on an AMD EPYC: the test assumed none); the tokens whose two
    # logprobs differ are counted from the library's per-token values, not from the totals' code
    from viewer.rescore import rescore
    from viewer.sources import load_source

    res = rescore(load_source(src), "tiny-qwen3", dtype="float32")
    pairs = [(s, t) for turn in res.turns for s, t in zip(turn.sampler, turn.trainer) if t is not None]
    assert doc["totals"]["tokens"] == len(pairs)
    assert doc["totals"]["flagged"] == sum(1 for s, t in pairs if s != t) > 0


def test_errors_are_one_line_with_exit_codes(capsys, tmp_path):
    _need("tiny-qwen3")
    assert main(["rescore", str(tmp_path / "nope"), "--model", "tiny-qwen3"]) == 2
    assert main(["rescore", str(SMOL), "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("error: ") for e in err) and "config.json" in err[1]
    with pytest.raises(SystemExit) as e:
        main(["rescore", str(SMOL)])  # --model is required
    assert e.value.code == 2


def _build(name: str) -> None:
    """The capture model ``name``, built once into .cache/models by the vLLM environment (as a capture does)."""
    from viewer.rescore.model import resolve_model

    if not (REPO_ROOT / ".cache" / "models" / name / ".done").exists():
        if not (REPO_ROOT / ".venv-vllm" / "bin" / "python").exists():
            need(".venv-vllm", f"it builds the {name} model; scripts/setup_capture.sh installs it")
        resolve_model(name)
