"""The render worker's own side: the process :mod:`viewer.tokenizer.render_worker` starts
(``python -m viewer.tokenizer.render_child MB``) to render visitors' chat templates within the
``template_s`` / ``template_mb`` budgets, and the length-prefixed JSON both sides speak (never pickle).
"""
from __future__ import annotations

import json
import signal
import struct
import sys
from typing import Any

__all__ = ["HDR", "read_msg", "write_msg", "main"]

HDR = struct.Struct("!Q")


class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):  # pragma: no cover - runs in the worker
    raise _Timeout()


def read_msg(f) -> Any:
    head = f.read(HDR.size)
    if len(head) < HDR.size:
        return None
    (n,) = HDR.unpack(head)
    return json.loads(f.read(n).decode("utf-8"))


def write_msg(f, value: Any) -> None:
    # default=str: a value JSON lacks (a date from parquet) reaches the template as its text
    data = json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    f.write(HDR.pack(len(data)) + data)
    f.flush()


def _vm_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str]) -> int:  # pragma: no cover - runs in the worker (tests drive it through render)
    import resource

    mb = float(argv[0])
    from transformers.utils.chat_template_utils import render_jinja_template

    # warm the compiled-template cache and jinja's lazy imports before the cap
    render_jinja_template(conversations=[[{"role": "user", "content": "x"}]], chat_template="{{ messages }}")
    if mb > 0:
        cap = _vm_bytes() + int(mb * 1048576)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    signal.signal(signal.SIGALRM, _on_alarm)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            req = read_msg(inp)
        except MemoryError:
            return 3
        if req is None:
            return 0
        try:
            signal.setitimer(signal.ITIMER_REAL, float(req["seconds"]) if req["seconds"] else 0)
            try:
                text, _ = render_jinja_template(conversations=[req["messages"]], tools=req["tools"],
                                                chat_template=req["template"],
                                                add_generation_prompt=req["add_generation_prompt"],
                                                **req["kwargs"])
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            reply = {"text": text[0]}
            del text
        except _Timeout:
            reply = {"budget": "template_s"}
        except MemoryError:
            reply = {"budget": "template_mb"}
        except RecursionError:
            reply = {"budget": "nesting"}
        except Exception as e:  # the template's own error (raise_exception, undefined, ...)
            reply = {"error": f"{type(e).__name__}: {e}"[:2000]}
        try:
            write_msg(out, reply)
        except MemoryError:
            return 3
        if "budget" in reply:
            return 2  # start afresh: a worker that ran out may hold fragments of what it built


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
