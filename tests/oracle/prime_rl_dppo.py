# Copyright the prime-rl authors (PrimeIntellect-ai/prime-rl), Apache License 2.0:
# http://www.apache.org/licenses/LICENSE-2.0 (the repository's LICENSE; the file itself carries no header).
"""prime-rl's DPPO masks as its token export writes them, copied VERBATIM as a test oracle.

Origin: github.com/PrimeIntellect-ai/prime-rl at commit 559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21;
loss.py / token_export.py last changed in 289562d2ec28e9ff2fdd6625aaed2964cf5a7679):
``compute_importance_ratio_and_mismatch_kl`` from src/prime_rl/trainer/rl/loss.py and ``_compute_export_tensors``
from src/prime_rl/trainer/rl/token_export.py (the same masks as ``default_loss_fn``'s, and'ed with the loss mask).
Ours (marked "# ours"): the imports, and ``DefaultLossConfig`` as a dataclass with the two fields the code reads and
their defaults from packages/prime-rl-configs/src/prime_rl/configs/trainer.py (``dppo_mask_low`` /
``dppo_mask_high`` 0.2, ``Field(ge=0)``). See SOURCES.md.
"""
from collections.abc import Mapping  # ours
from dataclasses import dataclass  # ours
from typing import Any  # ours

import torch  # ours
from torch import Tensor  # ours


@dataclass  # ours
class DefaultLossConfig:  # ours
    dppo_mask_low: float = 0.2  # ours
    dppo_mask_high: float = 0.2  # ours


def compute_importance_ratio_and_mismatch_kl(
    trainer_logprobs: Tensor, inference_logprobs: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    log_importance_ratio = trainer_logprobs - inference_logprobs
    importance_ratio = torch.exp(log_importance_ratio)
    mismatch_kl = importance_ratio - log_importance_ratio - 1
    return log_importance_ratio, importance_ratio, mismatch_kl


def _compute_export_tensors(
    micro_batch: Mapping[str, Any], trainer_logprobs: Tensor, loss_config: Any
) -> dict[str, Tensor | None]:
    fields: dict[str, Tensor | None] = {
        "log_importance_ratio": None,
        "importance_ratio": None,
        "mismatch_kl": None,
        "prob_delta": None,
        "is_masked": None,
        "is_masked_high": None,
        "is_masked_low": None,
    }
    # Ratio-based fields are meaningless when no token has sampling logprobs
    # (e.g. pure CE batches distilling frozen-model tokens): no rl member
    # (stream present but all-zero) and no ref_kl member.
    rl_weights = micro_batch.get("rl_weights")
    ref_kl_weights = micro_batch.get("ref_kl_weights")
    no_rl = rl_weights is not None and not bool((rl_weights != 0).any())
    no_ref_kl = ref_kl_weights is None or not bool((ref_kl_weights != 0).any())
    if no_rl and no_ref_kl:
        return fields

    inference_logprobs = micro_batch["inference_logprobs"].to(trainer_logprobs.device)
    loss_mask = micro_batch["loss_mask"].to(trainer_logprobs.device)
    advantages = micro_batch["advantages"].to(trainer_logprobs.device)
    with torch.no_grad():
        log_ratio, ratio, mismatch_kl = compute_importance_ratio_and_mismatch_kl(trainer_logprobs, inference_logprobs)
        prob_delta = torch.exp(trainer_logprobs) - torch.exp(inference_logprobs)
        fields["log_importance_ratio"] = log_ratio
        fields["importance_ratio"] = ratio
        fields["mismatch_kl"] = mismatch_kl
        fields["prob_delta"] = prob_delta
        if isinstance(loss_config, DefaultLossConfig):
            invalid_high = prob_delta > loss_config.dppo_mask_high
            invalid_low = prob_delta < -loss_config.dppo_mask_low
            positive_advantages = advantages > 0
            negative_advantages = advantages < 0
            invalid = torch.where(positive_advantages, invalid_high, invalid_low)
            fields["is_masked"] = loss_mask & invalid
            fields["is_masked_high"] = loss_mask & positive_advantages & invalid_high
            fields["is_masked_low"] = loss_mask & negative_advantages & invalid_low
    return fields
