"""Write the prime-rl token exports in this folder with prime-rl's OWN writer (see SOURCES.md).

prime-rl commits no export file, so these are produced by its ``TokenExporter`` (imported
unmodified from a checkout of PrimeIntellect-ai/prime-rl) the way its trainer calls it
(``src/prime_rl/trainer/rl/train.py``: ``token_exporter.export(step, micro_step, micro_batch,
out, sequence_lengths, config.loss)``), on packed micro batches shaped as
``src/prime_rl/trainer/batch.py`` packs them: several samples per micro batch, position ids
restarting per sample, padding (token 1, env name "", loss mask False) appended to the last
sample; per-token inference logprobs 0.0 on context tokens; trainer logprobs shifted right
with ``log(1/vocab)`` at position 0. Token ids are real Qwen3 ids of ChatML text, one
``tokenizers`` encode per segment (prompt, each sampled reply, each tool response) as a
token-in/token-out renderer does. The logprob values are seeded numbers, not a model's.

Run (not by the tests)::

    PYTHONPATH=<prime-rl>/src:<prime-rl>/packages/prime-rl-configs/src \\
        python make_exports.py head OUT_DIR TOKENIZER_JSON
    PYTHONPATH=<prime-rl@fa21395a6>/src:<...>/packages/prime-rl-configs/src \\
        python make_exports.py fa21395 OUT_DIR TOKENIZER_JSON
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer

from prime_rl.configs.trainer import DefaultLossConfig, IPOLossConfig
from prime_rl.trainer.rl.token_export import TokenExporter

VOCAB = 151936  # Qwen3
SYSTEM = "<|im_start|>system\nYou are a coding agent. Call the `run` tool to execute shell commands.<|im_end|>\n"


def user(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def tool(text: str) -> str:
    return f"\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def call(think: str, cmd: str) -> str:
    return (f"<think>\n{think}\n</think>\n\n<tool_call>\n{{\"name\": \"run\", \"arguments\": {{\"cmd\": \"{cmd}\"}}}}"
            "\n</tool_call><|im_end|>")


def answer(think: str, text: str) -> str:
    return f"<think>\n{think}\n</think>\n\n{text}<|im_end|>"


# (segments as (text, sampled?), advantage, reward); a branch of an agentic rollout as one flat sequence
SAMPLES = {
    "lines": ([(SYSTEM + user("How many lines does README.md have?"), False),
               (call("I should count the lines with wc.", "wc -l README.md"), True),
               (tool("42 README.md"), False),
               (answer("wc printed 42.", "README.md has 42 lines."), True)], 0.5, 1.0),
    "wrong": ([(SYSTEM + user("Which Python version is installed?"), False),
               (answer("Probably 3.8.", "Python 3.8 is installed."), True)], -0.5, 0.0),
    "tests": ([(SYSTEM + user("Run the unit tests and tell me if they pass."), False),
               (call("Run pytest quietly.", "python -m pytest -q"), True),
               (tool("3 passed, 1 failed in 0.41s"), False),
               (call("Look at the failure.", "python -m pytest -q -x --tb=line"), True),
               (tool("tests/test_io.py:12: AssertionError"), False),
               (answer("One test fails in test_io.py.", "3 tests pass and tests/test_io.py line 12 fails."), True)],
              1.0, 1.0),
    "context": ([(SYSTEM + user("Say hi."), False), (answer("Greet.", "Hi!"), False)], 0.0, 0.0),
}


def encode(tok: Tokenizer, name: str) -> tuple[list[int], list[bool]]:
    ids: list[int] = []
    mask: list[bool] = []
    for text, sampled in SAMPLES[name][0]:
        seg = tok.encode(text, add_special_tokens=False).ids
        ids += seg
        mask += [sampled] * len(seg)
    return ids, mask


def logprobs(gen: torch.Generator, mask: list[bool], big: dict[int, float]) -> tuple[list[float], list[float]]:
    """(inference, trainer) per token: sampled tokens get a sampler logprob and a trainer logprob a
    little off it (``big``: position -> a larger trainer-minus-sampler shift of probability);
    context tokens 0.0 for the sampler (no sampling logprob) and some trainer value."""
    n = len(mask)
    inf, tr = [], []
    for i in range(n):
        if mask[i]:
            p = float(torch.rand((), generator=gen)) ** 0.25 * 0.999 + 1e-4
            if i in big:  # a token the sampler found unlikely (or likely) that the trainer moves a lot
                p = 0.35 if big[i] > 0 else 0.85
            s = math.log(p)
            t = s + float(torch.randn((), generator=gen)) * 0.02
            if i in big:
                t = math.log(min(max(p + big[i], 1e-4), 0.9999))
            inf.append(s)
            tr.append(min(t, 0.0))
        else:
            inf.append(0.0)
            tr.append(-float(torch.rand((), generator=gen)) * 6)
    return inf, tr


def pack(tok: Tokenizer, gen: torch.Generator, names: list[str], *, pad_to: int = 64, rewards: bool = False,
         rl_weights: bool = False, big: dict[str, dict[int, float]] | None = None):
    """One micro batch as the trainer holds it, the model output and sequence_lengths."""
    cols: dict[str, list] = {k: [] for k in ("input_ids", "position_ids", "loss_mask", "advantages",
                                             "inference_logprobs", "trainer", "entropy", "env_names", "rewards",
                                             "rl_weights")}
    lengths = []
    for name in names:
        ids, mask = encode(tok, name)
        _, adv, reward = SAMPLES[name]
        inf, tr = logprobs(gen, mask, (big or {}).get(name, {}))
        tr[0] = math.log(1.0 / VOCAB)  # shift_tensor_right's pad value
        cols["input_ids"] += ids
        cols["position_ids"] += list(range(len(ids)))
        cols["loss_mask"] += mask
        cols["advantages"] += [adv if m else 0.0 for m in mask]
        cols["inference_logprobs"] += inf
        cols["trainer"] += tr
        cols["entropy"] += [float(torch.rand((), generator=gen)) * 2 for _ in ids]
        cols["env_names"] += [f"agent-{name}"] * len(ids)
        cols["rewards"] += [reward] * len(ids)
        cols["rl_weights"] += [1.0 if m else 0.0 for m in mask]
        lengths.append(len(ids))
    pad = (pad_to - len(cols["input_ids"]) % pad_to) % pad_to  # batch.py's pad_micro_batch
    cols["input_ids"] += [1] * pad
    cols["position_ids"] += list(range(pad))
    cols["loss_mask"] += [False] * pad
    for k in ("advantages", "inference_logprobs", "rewards", "rl_weights"):
        cols[k] += [0.0] * pad
    cols["trainer"] += [math.log(1.0 / VOCAB)] * pad
    cols["entropy"] += [0.0] * pad
    cols["env_names"] += [""] * pad
    lengths[-1] += pad

    def t(k, dtype):
        return torch.tensor([cols[k]], dtype=dtype)

    mb = {"input_ids": t("input_ids", torch.long), "position_ids": t("position_ids", torch.long),
          "loss_mask": t("loss_mask", torch.bool), "advantages": t("advantages", torch.float32),
          "inference_logprobs": t("inference_logprobs", torch.float32), "env_names": cols["env_names"],
          "training_mode": "rl"}
    if rewards:
        mb["rewards"] = t("rewards", torch.float32)
    if rl_weights:
        mb["rl_weights"] = t("rl_weights", torch.float32)
    out = {"logprobs": t("trainer", torch.float32), "entropy": t("entropy", torch.float32)}
    return mb, out, lengths


def main(which: str, out_dir: Path, tokenizer_json: Path) -> None:
    tok = Tokenizer.from_file(str(tokenizer_json))
    gen = torch.Generator().manual_seed(20261205)
    exporter = TokenExporter(out_dir, rank=0)
    if which == "head":  # prime-rl 559b447: no rewards column, component weight streams
        big = {"lines": {60: 0.45}, "wrong": {41: -0.5}}
        mb, out, lengths = pack(tok, gen, ["lines", "wrong"], big=big)
        exporter.export(0, 0, mb, out, lengths, DefaultLossConfig())
        mb, out, lengths = pack(tok, gen, ["tests", "context"], rl_weights=True)
        exporter.export(0, 1, mb, out, lengths, DefaultLossConfig())
    else:  # prime-rl fa21395a6: per-token rewards and training_mode; IPO loss: no is_masked columns
        mb, out, lengths = pack(tok, gen, ["tests"], rewards=True, big={"tests": {100: -0.6}})
        exporter.export(3, 0, mb, out, lengths, DefaultLossConfig())
        mb, out, lengths = pack(tok, gen, ["wrong", "lines"], rewards=True)
        exporter.export(3, 1, mb, out, lengths, IPOLossConfig())
    exporter.mark_stable()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
