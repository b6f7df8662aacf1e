"""What a capture is asked to do: :class:`CaptureSpec`, one plain value built by the CLI, the
Capture tab and the tests, read by :class:`viewer.capture.job.CaptureJob`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CaptureSpec", "PHASES"]


PHASES = ("setup", "server", "agent", "rescore", "reward", "artefacts")


@dataclass
class CaptureSpec:
    out: str
    backend: str = "local"  # local | endpoint | hf-jobs
    model: str = "tiny-qwen3"  # CPU model name, local folder, Hub name (local GPU) or served name (endpoint)
    endpoint: str = ""
    token: str = field(default="", repr=False)  # endpoint / HF token: used, never written
    task_source: str = "bundled"  # bundled | deepcoder
    task_index: int = 0
    n_prompts: int = 64
    seed: int = 0
    instruction: str = ""
    scripted: bool = False
    agent_timeout_s: float = 300.0
    test_timeout_s: float = 10.0
    server_timeout_s: float = 600.0
    max_output_tokens: int = 1024
    context_tokens: int = 16384
    steps: int = 8
    top_logprobs: int = 5
    logprobs_mode: str = ""  # "" = raw_logprobs when scripted (the model's own values), else processed_logprobs
    title: bool = True
    auto_compaction: bool = False
    vllm_python: str = ""
    opencode_bin: str = ""
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
    # install the capture environment (vLLM env, opencode) when missing, with its output in the log
    auto_setup: bool = True
    tokenizer: str = ""  # where the served model's tokenizer is (folder or Hub name); default: from the model
    flavor: str = "a100-large"  # hf-jobs
    results_repo: str = ""  # hf-jobs: dataset repo the job pushes the artefacts to

    def public(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("token", None)
        return d
