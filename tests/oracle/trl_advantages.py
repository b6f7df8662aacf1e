"""TRL's own GRPO advantage lines as a test oracle (issue 38, point 4: groups).

Run inside the isolated oracle environment (scripts/setup_oracle.sh), choosing the TRL release by path:

    PYTHONPATH=.venv-trl/trl-1.16.0 .venv-trl/bin/python tests/oracle/trl_advantages.py < groups.json > out.json

Input ``{"groups": [[reward | null, ...], ...]}``; output ``{"trl_version", "results": [{"advantages": [...],
"std_zero": bool}, ...]}`` in the same order, stdout carrying that JSON only.

Deliberately independent of the app (imports nothing from ``viewer``), and no copy of TRL's arithmetic: the
lines are read out of ``GRPOTrainer._generate_and_score_completions`` as the installed TRL ships them (from
``unscorable_mask = ...`` through ``advantages = torch.nan_to_num(...)``) and executed on each group, with the
trainer's settings for a single reward function: ``scale_rewards="group"``, ``sum_then_normalize``, weight 1.
A reward of null is a reward function's None (TRL: NaN, left out of the baseline, advantage 0).
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import textwrap
from types import SimpleNamespace

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
_real_stdout = sys.stdout
sys.stdout = sys.stderr  # anything printed while importing must not corrupt our JSON
try:
    import torch
    import trl
    from trl.trainer import grpo_trainer
    from trl.trainer.utils import nanstd
finally:
    sys.stdout = _real_stdout

START, END = "unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)", \
    "advantages = torch.nan_to_num(advantages, nan=0.0)"


def trl_lines() -> str:
    """TRL's advantage block, dedented, exactly as shipped."""
    src = inspect.getsource(grpo_trainer.GRPOTrainer._generate_and_score_completions)
    a, b = src.index(START), src.index(END) + len(END)
    line_start = src.rindex("\n", 0, a) + 1
    return textwrap.dedent(src[line_start:b])


def run(code, rewards: list) -> dict:
    per_func = torch.tensor([[float("nan") if r is None else float(r)] for r in rewards], dtype=torch.float32)
    trainer = SimpleNamespace(multi_objective_aggregation="sum_then_normalize", scale_rewards="group",
                              reward_weights=torch.ones(1))
    ns = {"torch": torch, "nanstd": nanstd, "self": trainer, "rewards_per_func": per_func,
          "num_generations": len(rewards), "device": "cpu"}
    exec(code, ns)
    return {"advantages": ns["advantages"].tolist(), "std_zero": bool(ns["is_std_zero"].all())}


def main() -> None:
    code = compile(trl_lines(), "trl-grpo-advantages", "exec")
    cases = json.load(sys.stdin)["groups"]
    json.dump({"trl_version": trl.__version__, "results": [run(code, g) for g in cases]}, sys.stdout)


if __name__ == "__main__":
    main()
