"""TRL 1.16's own vLLM importance-sampling correction, run on given per-token logprobs (a test oracle).

    PYTHONPATH=.venv-trl/trl-1.16.0 .venv-trl/bin/python tests/oracle/trl_is_oracle.py < cases.json > out.json

With ``--serve``: one request per line of stdin, one answer per line of stdout, until stdin closes (the tests
start it once per module: importing torch and TRL is most of a call's time).

Imports nothing from `viewer`. Which TRL code runs: the correction is not a function of its own in TRL 1.16, it
is inline in `GRPOTrainer._generate_and_score_completions` (generation, reward and model calls around it). We
take that method's source with `inspect.getsource` and cut out, verbatim, its two IS pieces:

1. from the comment line `# Compute the importance sampling ratio when using vLLM...` up to `# Compute the
   per-token log probabilities for the reference model...`: mask, old − sampling, nan_to_num, sequence sum, exp, clamp / mask;
2. from the `if self.use_vllm and self.vllm_importance_sampling_correction:` whose next line is
   `delta = torch.abs(...)` up to `output = {`: the five `sampling/...` metrics.

Both run with `exec` in the grpo_trainer module's own globals (its `torch`, `math`, `nanmin`, `nanmax`) on a
real `GRPOTrainer` instance (made with `__new__`: no model) whose IS attributes are set from a real
`GRPOConfig` as `GRPOTrainer.__init__` sets them, a real CPU `accelerate.Accelerator` for the gathers, and
float32 tensors `old_per_token_logps` (trainer) / `sampling_per_token_logps` (sampler) / an int
`completion_mask`, rows right-padded with mask 0. If TRL's source moves, the cut fails loudly here.

Input `{"cases": [{"name", "mode", "clip_min", "clip_max", "rows": [{"sampler", "trainer", "mask"}]}]}` (NaN
allowed, as Python's json writes it); output `{"trl_version", "defaults", "results": [{"name", "ratio",
"metrics"} | {"name", "error"}]}`, `ratio` one list per row (length 1 in sequence modes).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys
import tempfile
import textwrap
from collections import defaultdict

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_real_stdout, sys.stdout = sys.stdout, sys.stderr  # keep stdout for the JSON only
try:
    import torch
    import trl
    import trl.trainer.grpo_trainer as G
    from accelerate import Accelerator
    from trl import GRPOConfig
finally:
    sys.stdout = _real_stdout

IS_START = "# Compute the importance sampling ratio when using vLLM"
IS_END = "# Compute the per-token log probabilities for the reference model"
METRICS_START = "if self.use_vllm and self.vllm_importance_sampling_correction:\n"
METRICS_NEXT = "delta = torch.abs(old_per_token_logps - sampling_per_token_logps)"
METRICS_END = "output = {"


def _blocks() -> tuple[str, str]:
    src = inspect.getsource(G.GRPOTrainer._generate_and_score_completions)
    lines = src.splitlines(keepends=True)
    a = next(i for i, ln in enumerate(lines) if ln.strip().startswith(IS_START))
    b = next(i for i in range(a, len(lines)) if lines[i].strip().startswith(IS_END))
    c = next(i for i in range(b, len(lines)) if lines[i].strip() == METRICS_START.strip()
             and lines[i + 1].strip() == METRICS_NEXT)
    d = next(i for i in range(c, len(lines)) if lines[i].strip() == METRICS_END)
    return textwrap.dedent("".join(lines[a:b])), textwrap.dedent("".join(lines[c:d]))


IS_BLOCK, METRICS_BLOCK = _blocks()
IS_CODE = compile(IS_BLOCK, "grpo_trainer.py:<IS correction>", "exec")
METRICS_CODE = compile(METRICS_BLOCK, "grpo_trainer.py:<IS metrics>", "exec")
ACCELERATOR = Accelerator(cpu=True)
OUTDIR = tempfile.mkdtemp(prefix="trl-is-oracle-")


def _trainer(mode: str, clip_min, clip_max):
    args = GRPOConfig(output_dir=OUTDIR, use_cpu=True, bf16=False, report_to=[], use_vllm=True,
                      vllm_importance_sampling_mode=mode, vllm_importance_sampling_clip_min=clip_min,
                      vllm_importance_sampling_clip_max=clip_max)
    self = G.GRPOTrainer.__new__(G.GRPOTrainer)
    # as GRPOTrainer.__init__ sets them (grpo_trainer.py, "self.vllm_importance_sampling_correction = ...")
    self.use_vllm = args.use_vllm
    self.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    self.vllm_importance_sampling_mode = args.vllm_importance_sampling_mode
    self.vllm_importance_sampling_clip_max = args.vllm_importance_sampling_clip_max
    self.vllm_importance_sampling_clip_min = args.vllm_importance_sampling_clip_min
    self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    self.__dict__["accelerator"] = ACCELERATOR
    return self


def run_case(case: dict) -> dict:
    rows = case["rows"]
    width = max(len(r["mask"]) for r in rows)

    def pad(key, fill):
        return [list(r[key]) + [fill] * (width - len(r[key])) for r in rows]

    ns = dict(vars(G))
    ns.update(self=_trainer(case["mode"], case.get("clip_min"), case.get("clip_max")),
              old_per_token_logps=torch.tensor(pad("trainer", 0.0), dtype=torch.float32),
              sampling_per_token_logps=torch.tensor(pad("sampler", 0.0), dtype=torch.float32),
              completion_mask=torch.tensor(pad("mask", 0), dtype=torch.long), tool_mask=None,
              device=torch.device("cpu"), mode="train")
    exec(IS_CODE, ns)
    exec(METRICS_CODE, ns)
    ratio = ns["vllm_importance_sampling_ratio"]
    seq = ratio.shape[1] == 1 and case["mode"].startswith("sequence")
    out = [[float(x) for x in row[: (1 if seq else len(r["mask"]))]] for row, r in zip(ratio.tolist(), rows)]
    metrics = {k: v[-1] for k, v in ns["self"]._metrics["train"].items()}
    return {"name": case["name"], "ratio": out, "metrics": metrics, "dtype": str(ratio.dtype)}


def main() -> int:
    if sys.argv[1:] == ["--serve"]:  # one request per line, one answer per line: TRL imported once per session
        for line in sys.stdin:
            if line.strip():
                answer(json.loads(line))
                sys.stdout.flush()
        return 0
    answer(json.load(sys.stdin))
    return 0


def answer(payload: dict) -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig) if f.name.startswith("vllm_importance")}
    results = []
    for case in payload.get("cases", []):
        real, sys.stdout = sys.stdout, sys.stderr
        try:
            results.append(run_case(case))
        except Exception as exc:  # TRL's own validation (GRPOConfig) raised: report it for this case
            results.append({"name": case.get("name"), "error": f"{type(exc).__name__}: {exc}"})
        finally:
            sys.stdout = real
    json.dump({"trl_version": trl.__version__, "defaults": defaults, "is_block": IS_BLOCK,
               "results": results}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.exit(main())
