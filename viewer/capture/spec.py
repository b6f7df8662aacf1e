"""What a capture is asked to do: :class:`CaptureSpec`, one plain value built by
:func:`viewer.capture.fields.capture_spec` (the CLI, the Capture tab, the job script) and the tests,
read by :class:`viewer.capture.job.CaptureJob`."""
from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from viewer.config import Settings

__all__ = ["CaptureSpec", "PHASES", "unique_name", "new_capture_dir"]


def unique_name(prefix: str = "capture") -> str:
    """``capture-YYYYmmdd-HHMMSS-<8 hex>``: readable, sortable, and two visitors starting in the same
    second never share a capture folder or an hf-jobs run name."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


def new_capture_dir(root: str | Path, prefix: str = "capture") -> Path:
    """A new, empty capture folder under ``root``, created exclusively (never an existing one)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        p = root / unique_name(prefix)
        try:
            p.mkdir()
            return p
        except FileExistsError:
            continue
    raise FileExistsError(f"could not make a new capture folder under {root}")


PHASES = ("setup", "server", "agent", "rescore", "reward", "artefacts")
# The defaults a setting covers are the setting's own (viewer/config.py, CAPTURE_*): one owner.
_S = Settings()


@dataclass
class CaptureSpec:
    out: str
    backend: str = "local"  # local | endpoint | hf-jobs
    model: str = _S.capture_model  # CPU model name, local folder, Hub name (local GPU) or served name (endpoint)
    endpoint: str = ""
    token: str = field(default="", repr=False)  # endpoint / HF token: used, never written
    task_source: str = "bundled"  # bundled | deepcoder
    task_index: int = 0
    n_prompts: int = 64
    seed: int = 0
    instruction: str = ""
    scripted: bool = False
    agent_timeout_s: float = _S.capture_agent_timeout_s
    test_timeout_s: float = _S.capture_test_timeout_s
    server_timeout_s: float = 600.0
    max_output_tokens: int = _S.capture_max_output_tokens
    context_tokens: int = 16384
    steps: int = 8
    top_logprobs: int = _S.capture_top_logprobs
    logprobs_mode: str = _S.capture_logprobs_mode  # "" = raw_logprobs when scripted (the model's own values), else processed_logprobs
    # sampling the proxy pins on every chat call (None: what the agent sends, else the engine's default);
    # recorded in the trace's requests and summary.json's "sampling" (viewer.capture.sampling)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    title: bool = True
    auto_compaction: bool = False
    vllm_python: str = _S.capture_vllm_python
    opencode_bin: str = _S.capture_opencode
    # scripted mode: bash commands the expert runs before its solution (tests use it to try
    # what an agent's tools can do, e.g. a command that backgrounds itself)
    script_commands: list[str] = field(default_factory=list)
    # the agent (and its solution's tests) run in viewer.capture.sandbox when the machine can
    # make one; require_sandbox (public mode) refuses the capture when it cannot
    sandbox: bool = True
    require_sandbox: bool = False
    # logit_bias -100 on the tokenizer's <tool_call>/</tool_call> special tokens, so the model
    # spells them as plain pieces (the retokenisation case the viewer exists to show)
    spell_tool_call_as_pieces: bool = False
    # scripted mode: ask the server for the model's own (unconstrained) logprobs of each forced call
    # (viewer.capture.rescore). Off, the calls keep the grammar-masked values the sampler reported
    # (≈ 0 on forced tokens); on CPU the rescoring is most of a scripted capture's time (docs/SPEED.md)
    rescore: bool = True
    # install the capture environment (vLLM env, opencode) when missing, with its output in the log
    auto_setup: bool = _S.capture_auto_setup
    tokenizer: str = ""  # where the served model's tokenizer is (folder or Hub name); default: from the model
    flavor: str = _S.capture_hf_flavor  # hf-jobs
    results_repo: str = _S.capture_results_repo  # hf-jobs: dataset repo the job pushes the artefacts to
    # started on a public app: an endpoint is pinned to a checked, globally routable address
    public_app: bool = False

    def tokenizer_names(self, served: str, model_dir: str | None) -> tuple[Any, ...]:
        """Where to look for the tokenizer, in order: the tokenizer, the built model's folder, the served
        name, the model. On a public app no name may be a server folder: the served name comes from the
        endpoint, i.e. from a visitor."""
        def ok(n: str | None) -> str | None:
            if self.public_app and n and (str(n)[:1] in "/.~" or Path(str(n)).exists()):
                return None
            return n

        return ok(self.tokenizer), model_dir, ok(served), ok(self.model)

    def public(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("token", None)
        return d
