"""The part of Δ = trainer − sampler that the sampler's settings make by construction (docs/MISMATCH.md).

vLLM 0.32's sampler (``vllm/v1/sample/sampler.py``, ``ops/topk_topp_sampler.py``) returns, per
``--logprobs-mode``:

* ``raw_logprobs``: ``log_softmax(z)`` of the model's logits ``z``, before anything else: the
  model's own distribution (temperature 1, no nucleus);
* ``processed_logprobs``: ``log_softmax`` after logits processors (logit bias, penalties, min
  tokens), temperature (``z / T``) and top-k / top-p, which set every dropped token to −inf, so
  the kept tokens are renormalised: ``log p_T(x) − log S`` with ``S`` the kept tokens' mass under
  ``p_T``. A greedy request (``T < 1e-5``) gets ``log_softmax(z)`` (no temperature, no nucleus).

So a trainer logprob computed at temperature ``T_r`` differs from the sampler's, before any kernel
or precision difference, by ``expected = log p_{T_r}(x) − log p_{T_s}(x) + log S`` (``T_s`` = the
sampler's temperature, 1 and ``S`` = 1 for raw logprobs), ``S`` computed from the trainer's own
logits at that position with vLLM's top-k then top-p rule. :func:`chunk_expected` computes it
next to the trainer logprob (torch, called by :func:`viewer.rescore.model.score_rows`);
:func:`settings_of` reads the settings from the capture (no torch).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Sampling", "settings_of", "chunk_expected", "NEUTRAL", "PROCESSED_MODES"]

PROCESSED_MODES = ("processed_logprobs",)
GREEDY_EPS = 1e-5  # vLLM's _SAMPLING_EPS: below it a request is greedy
SUB_CHUNK = 64     # positions sorted at once (each a vocabulary-wide sort): bounds the extra memory
TOP_M = 1024       # the top values tried first: a trained model's nucleus is decided inside them
NEUTRAL = (1.0, 1.0, 0)
# request fields that change processed logprobs and are not modelled here (said in a note when used)
_UNMODELLED = ("logit_bias", "repetition_penalty", "presence_penalty", "frequency_penalty", "min_p", "min_tokens",
               "bad_words", "allowed_token_ids")


@dataclass(frozen=True)
class Sampling:
    """One call's sampler settings; :meth:`effective` is what its logprobs were computed with."""

    mode: str | None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    def effective(self) -> tuple[float, float, int]:
        """(T, top_p, top_k) of the distribution the returned logprob is from: NEUTRAL unless processed."""
        if self.mode not in PROCESSED_MODES or self.temperature < GREEDY_EPS:
            return NEUTRAL
        return (float(self.temperature), float(self.top_p), int(self.top_k))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def settings_of(rollout: Any, summary: dict[str, Any]) -> tuple[dict[int, Sampling], dict[str, Any], list[str]]:
    """turn → :class:`Sampling` for every agent turn, a description for ``--json``, and notes.

    The mode comes from ``summary.json`` (``sampling.logprobs_mode``, else ``server.logprobs_mode``;
    unknown: vLLM's default ``raw_logprobs``); each value from the turn's request as forwarded, else
    the engine's recorded defaults (``sampling.defaults``), else vLLM's neutral values."""
    samp = summary.get("sampling") if isinstance(summary.get("sampling"), dict) else {}
    server = summary.get("server") if isinstance(summary.get("server"), dict) else {}
    mode = samp.get("logprobs_mode") or server.get("logprobs_mode")
    notes = []
    if not mode:
        notes.append("no logprobs mode recorded: vLLM's default raw_logprobs assumed (nothing expected from settings)")
    defaults = samp.get("defaults")
    if not isinstance(defaults, dict):
        defaults = {}
        if mode in PROCESSED_MODES:
            notes.append("the engine's sampling defaults were not recorded: a request without temperature / top_p / "
                         "top_k is taken as 1.0 / 1.0 / off")
    out: dict[int, Sampling] = {}
    unmodelled: set[str] = set()
    for t in rollout.agent_turns:
        req = t.request if isinstance(t.request, dict) else {}

        def val(key: str, neutral: float) -> float:
            v = _num(req.get(key))
            return v if v is not None else (_num(defaults.get(key)) if _num(defaults.get(key)) is not None else neutral)

        k = int(val("top_k", 0))
        out[t.index] = Sampling(mode, val("temperature", 1.0), min(val("top_p", 1.0), 1.0), k if k > 0 else 0)
        unmodelled |= {f for f in _UNMODELLED if req.get(f) not in (None, 0, 0.0, 1.0, {}, [])}
    if mode in PROCESSED_MODES and unmodelled:
        notes.append(f"requests use {', '.join(sorted(unmodelled))}: processed logprobs include them, the expected "
                     "offset does not (their effect stays in the residual)")
    eff = sorted({s.effective() for s in out.values()})
    desc = {"logprobs_mode": mode, "settings": [{"temperature": t, "top_p": p, "top_k": k} for t, p, k in eff],
            "defaults": defaults or None}
    return out, desc, notes


def chunk_expected(logits: Any, tok: Any, lp_r: Any, params: list[tuple[float, float, int]],
                   t_r: float) -> list[float]:
    """Expected Δ for each row of ``logits`` (positions × vocab, float32, the model's own logits),
    whose token is ``tok`` and whose trainer logprob at temperature ``t_r`` is ``lp_r``; ``params``:
    the sampler's effective (T, top_p, top_k) per position."""
    import torch

    out = torch.zeros(len(params), dtype=torch.float32, device=logits.device)
    vocab = logits.shape[-1]
    for key in sorted(set(params)):
        T, p, k = key
        nucleus = p < 1.0 or 0 < k < vocab
        if not nucleus and T == t_r:
            continue  # the same distribution on both sides: nothing expected
        idx = [i for i, x in enumerate(params) if x == key]
        for c in range(0, len(idx), SUB_CHUNK):
            ii = torch.tensor(idx[c:c + SUB_CHUNK], device=logits.device)
            z = logits[ii] / float(T)
            lse = torch.logsumexp(z, dim=-1)
            lp_s = z.gather(-1, tok[ii][:, None])[:, 0] - lse
            log_s = _log_kept_mass(z, lse, p, k) if nucleus else 0.0
            out[ii] = lp_r[ii] - lp_s + log_s
    return out.tolist()


def _log_kept_mass(z: Any, lse: Any, p: float, k: int) -> Any:
    """log S per row. A trained model's nucleus is a few hundred tokens: the top TOP_M values decide it
    (one ``topk``, ~10× cheaper than a vocabulary-wide sort) whenever the TOP_M-th token is already
    dropped (or top-k alone keeps fewer); otherwise (a flat distribution) the full sort of :func:`_kept`."""
    import torch

    vocab = z.shape[-1]
    m = min(vocab, max(TOP_M, k + 1 if k else 0))
    if m < vocab:
        top = z.topk(m, dim=-1).values  # descending
        keep = torch.ones_like(top, dtype=torch.bool)
        if k:
            keep &= top >= top[:, k - 1:k]
        if p < 1.0:
            # vLLM: over the top-k-renormalised distribution sorted ascending, drop where the cumulative
            # sum is ≤ 1 − p; descending, the cumulative sum at a token is 1 − (the mass above it)
            norm = torch.logsumexp(top.masked_fill(~keep, -math.inf), -1, keepdim=True) if k else lse[:, None]
            probs = torch.exp(top - norm).masked_fill(~keep, 0.0)
            above = probs.cumsum(dim=-1) - probs
            keep &= (1 - above) > 1 - torch.tensor(p, dtype=torch.float32, device=z.device)
            keep[:, 0] = True
        if not bool(keep[:, -1].any()):  # the boundary is inside the top m for every row
            return torch.logsumexp(top.masked_fill(~keep, -math.inf), dim=-1) - lse
    return torch.logsumexp(_kept(z, p, k), dim=-1) - lse


def _kept(z: Any, p: float, k: int) -> Any:
    """``z`` sorted ascending with the tokens vLLM's top-k then top-p drop set to −inf (the same
    operations as ``apply_top_k_top_p_pytorch``: top-k keeps values ≥ the k-th largest; top-p drops
    the ascending prefix whose cumulative probability, after top-k, is ≤ 1 − p, never the top token)."""
    import torch

    srt = z.sort(dim=-1).values
    vocab = srt.shape[-1]
    if 0 < k < vocab:
        srt = srt.masked_fill(srt < srt[:, vocab - k:vocab - k + 1], -math.inf)
    if p < 1.0:
        drop = srt.softmax(dim=-1).cumsum(dim=-1) <= 1 - torch.tensor(p, dtype=torch.float32, device=z.device)
        drop[:, -1] = False
        srt = srt.masked_fill(drop, -math.inf)
    return srt
