"""The trainer's forward pass: load a causal LM with transformers and score trainer rows.

torch is imported here only, inside functions: the app and every other CLI command start
without it (it takes seconds to import and the Space does not install it). Where it is
missing, :class:`TorchMissing` says how to get it.

Scoring runs the decoder once per batch of rows (rows packed by length under a token
budget, right-padded with an attention mask), then applies the LM head to the hidden
states at the trained positions only, in chunks, so a 150k-token vocabulary never
materialises ``[tokens × vocab]`` logits for the whole row. Progress is reported per
batch; Cancel is honoured between batches and chunks.
"""
from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from viewer.config import CACHE_DIR, REPO_ROOT, Settings
from viewer.rescore.expected import chunk_expected
from viewer.rescore.values import RowTarget

__all__ = ["TORCH_HINT", "TorchMissing", "ModelUnavailable", "RescoreCancelled", "torch_available", "resolve_model", "load_model",
           "score_rows", "pick_device", "import_torch"]

TORCH_HINT = ("Rescoring runs the model's forward pass and needs PyTorch, which is not installed here. Install the "
              "CPU build with `pip install -r requirements-rescore.txt` (torch==2.13.0; `pip install "
              "'rollout-inspector[rescore]'` for the package), or run `make setup`; everything else works without it.")
CUDA_BATCH_TOKENS = 16384  # padded tokens per forward pass on a GPU when the setting says 0 (auto)
HEAD_CHUNK = 512  # trained positions per LM-head call (bounds the logits buffer: chunk × vocab floats)


class TorchMissing(RuntimeError):
    def __init__(self) -> None:
        super().__init__(TORCH_HINT)


class ModelUnavailable(ValueError):
    """A model that cannot be loaded here (not in the local cache when offline, no such repository, no
    config.json): a dataset rescore says so once per model and does not try it again for every rollout."""

    def __init__(self, model: str, message: str):
        super().__init__(message)
        self.model = model


class RescoreCancelled(Exception):
    """Raised inside :func:`score_rows` when ``cancel`` is set; carries what was scored so far."""

    def __init__(self, partial: dict[int, list[float | None]]):
        super().__init__("cancelled")
        self.partial = partial


def torch_available() -> bool:
    """Whether torch can be imported (without importing it: that alone takes seconds)."""
    return importlib.util.find_spec("torch") is not None


def import_torch():
    """The ``torch`` module, imported on first use (seconds); :class:`TorchMissing` without it."""
    if not torch_available():
        raise TorchMissing()
    import torch

    return torch


def pick_device(device: str = "auto") -> str:
    """``auto``: CUDA when present, else CPU."""
    torch = import_torch()
    if device in ("", "auto", None):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available here")
    return device


def resolve_model(name: str, settings: Settings | None = None) -> str:
    """A loadable model reference: the capture models (``tiny-qwen3`` / ``smollm2``, built offline once
    into .cache/models), a local folder with a config.json, or a Hub name (from the local HF cache when
    offline)."""
    from viewer.capture.models import MODELS, ensure_model

    name = (name or "").strip()
    if not name:
        raise ValueError(f"no model given: name {', '.join(MODELS)}, a model folder or a Hub name")
    if name in MODELS:
        settings = settings or Settings()
        python = settings.capture_vllm_python or str(REPO_ROOT / ".venv-vllm" / "bin" / "python")
        built = CACHE_DIR / "models" / name / ".done"  # where ensure_model builds it
        if not built.exists() and not Path(python).exists():
            raise ValueError(f"model {name} is not built yet: it is built once (offline) by the capture "
                             f"environment's python ({python}), which `make setup` installs")
        return str(ensure_model(name, python))
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ValueError(f"model folder {p} has no config.json")
        return str(p.resolve())
    return name


_LOADED: dict[tuple, Any] = {}
_LOAD_LOCK = threading.Lock()


def load_model(ref: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, str, str]:
    """(model, device, dtype name). ``dtype`` ``auto`` = the dtype in the model's config (what the
    sampler's engine loads by default). The last model loaded stays in memory for the next rescore."""
    torch = import_torch()
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    device = pick_device(device)
    key = (ref, device, dtype)
    with _LOAD_LOCK:
        if key in _LOADED:
            m = _LOADED[key]
            return m, device, str(m.dtype).removeprefix("torch.")
        hf_logging.disable_progress_bar()  # "Loading weights" bars would land in the CLI's stderr
        want = "auto" if dtype in ("", "auto") else getattr(torch, dtype, None)
        if want is None or (want != "auto" and not isinstance(want, torch.dtype)):
            raise ValueError(f"unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16")
        try:
            m = AutoModelForCausalLM.from_pretrained(ref, dtype=want)
        except OSError as e:
            raise ModelUnavailable(ref, f"cannot load model {ref!r}: {e}") from e
        m = m.to(device).eval()
        _LOADED.clear()  # one model at a time: they are large
        _LOADED[key] = m
    return m, device, str(m.dtype).removeprefix("torch.")


def _batches(tgts: list[RowTarget], batch_tokens: int) -> list[list[RowTarget]]:
    """Rows sorted by length, packed while (rows × longest) stays within ``batch_tokens``."""
    out: list[list[RowTarget]] = []
    for t in sorted(tgts, key=lambda t: len(t.input_ids)):
        cur = out[-1] if out else None
        if cur and (len(cur) + 1) * len(t.input_ids) <= batch_tokens:
            cur.append(t)
        else:
            out.append([t])
    return out


def score_rows(model: Any, tgts: list[RowTarget], *, temperature: float = 1.0, batch_tokens: int = 0,
               progress: Callable[[int, int], None] | None = None,
               cancel: threading.Event | None = None,
               sampling: dict[int, list[tuple[float, float, int]]] | None = None,
               expected: dict[int, list[float]] | None = None) -> dict[int, list[float | None]]:
    """Trainer logprob of every target position: ``log_softmax(logits[i-1] / temperature)[ids[i]]``.

    Returns row → values parallel to ``RowTarget.positions``. Raises :class:`RescoreCancelled`
    (with the rows finished so far) when ``cancel`` is set. With ``sampling`` (row → the sampler's
    effective (T, top_p, top_k) per position) ``expected`` is filled with row → the Δ those settings
    make by construction (:func:`viewer.rescore.expected.chunk_expected`, from the same logits: one
    float per position kept, never the logits)."""
    torch = import_torch()
    device = next(model.parameters()).device
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    if batch_tokens <= 0:  # auto: see Settings.rescore_batch_tokens
        batch_tokens = CUDA_BATCH_TOKENS if device.type == "cuda" else 1
    total = sum(len(t.positions) for t in tgts)
    done = 0
    out: dict[int, list[float | None]] = {}
    if progress:
        progress(0, total)
    with torch.inference_mode():
        for batch in _batches(tgts, batch_tokens):
            if cancel is not None and cancel.is_set():
                raise RescoreCancelled(out)
            width = max(len(t.input_ids) for t in batch)
            ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
            att = torch.zeros((len(batch), width), dtype=torch.long)
            for b, t in enumerate(batch):
                ids[b, :len(t.input_ids)] = torch.tensor(t.input_ids)
                att[b, :len(t.input_ids)] = 1
            # no padding → no mask: the same call (and kernels) as the plain forward over these ids
            padded = any(len(t.input_ids) < width for t in batch)
            hidden = base(input_ids=ids.to(device),
                          attention_mask=att.to(device) if padded else None).last_hidden_state
            for b, t in enumerate(batch):
                vals: list[float | None] = []
                exp: list[float] = []
                for c in range(0, len(t.positions), HEAD_CHUNK):
                    if cancel is not None and cancel.is_set():
                        raise RescoreCancelled(out)
                    pos = t.positions[c:c + HEAD_CHUNK]
                    prev = torch.tensor([p - 1 for p in pos], device=device)
                    logits = head(hidden[b, prev]).float()
                    if softcap:  # Gemma-style final soft-capping is part of the model's logits
                        logits = torch.tanh(logits / softcap) * softcap
                    lp = torch.log_softmax(logits / float(temperature), dim=-1)
                    tok = torch.tensor([t.input_ids[p] for p in pos], device=device)
                    got = lp.gather(-1, tok[:, None])[:, 0]
                    vals.extend(got.tolist())
                    if sampling is not None and expected is not None:
                        exp.extend(chunk_expected(logits, tok, got, sampling[t.row][c:c + HEAD_CHUNK],
                                                  float(temperature)))
                out[t.row] = vals
                if sampling is not None and expected is not None:
                    expected[t.row] = exp
                done += len(t.positions)
            if progress:
                progress(done, total)
    return out
