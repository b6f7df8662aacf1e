"""Reader speed per file format: CPU time and peak RSS against ``json.load`` of the same file (issue 35).

Run: ``.venv/bin/python bench/bench_formats.py [--mb 200] [--repeat 3] [--form jsonl,array]
[--format-file PATH ...] [--bare]``.

Every figure comes from a fresh process (one per measurement, alternating the reader and the baseline
``--repeat`` times; the viewer's modules, every format's included, are imported before the clock), so
imports, page cache and allocator state are alike; CPU seconds are what a shared
machine disturbs least, wall seconds are printed beside them. Every child runs with one OpenBLAS thread
(``OPENBLAS_NUM_THREADS=1``; ``--blas-threads`` to change it): numpy's import, done before the clock,
starts an OpenBLAS worker that spins for ~0.1 s after it (0.02-0.06 s of CPU, measured with a sleep after
the import), and that import cost landed in whichever measure ran next (0.05x of a 0.6 s ``json``) while
no reader calls BLAS. Peak RSS is the process's ``VmHWM``
(interpreter and imports included) over the file's size. The baseline is the stdlib parse of the
same bytes: ``json.load`` of a JSON document, ``json.loads`` of each line of a JSONL file (``json.load``
refuses a JSONL file), as the stdlib runs by default; the same with the cyclic GC paused (which the
readers do) is printed beside it as the stricter baseline. Target (issue 35): CPU <= 0.3x ``json.load``
and peak RSS <= 0.3x the file.

1. **OpenEnv proxy trace** (docs/FORMATS.md §2.2, the shape of ``tests/data/capture_openenv``): one
   record per call, ``completion_token_ids`` empty, the ids only in ``"token_id:N"`` strings
   (``completion_tokens`` and each logprob entry's ``token``), top-5 ``top_logprobs`` whose ``bytes``
   spell ``"token_id:N"``, ``per_token_logps``; as JSONL (what the upstream proxy appends) and as a JSON
   array; ``--history`` makes each request carry the conversation so far (a 9 KB system prompt, then
   every earlier call's tool call and a 1 KB tool result, 50 calls a conversation), as an agent's
   requests do. Opened as a capture folder (``load_source(folder)``, the capture reader); ``--bare``
   also opens the bare ``trace.json`` (``load_source(file)``, which parses it as a row file first). The
   Rollout is checked against a digest worked out here from ``json`` (ids, logprobs, top-k ids /
   logprobs / offsets, token bytes); a difference fails the bench.
2. **``--format-file PATH``**: a row-format file (JSONL lines, or a JSON array's elements) replicated to
   at least ``--mb`` MB and opened with ``viewer.sources.open_dataset``, against the stdlib parse of the
   same bytes. Two lines: **read** (the target): every row read and turned into its Conversation by the
   format's ``read`` (exact-id formats build their Turns there; text-only rows stop at their messages),
   ``--repeat`` alternating runs; **rollout** (not a target, ``--rollout-repeat`` runs): every
   ``.rollout(i)`` whole, derive included (text-only rows are tokenised through the chat template,
   as the app does); **open (first screen)** (``--open-repeat`` alternating runs): what showing the file
   costs, ``open_dataset`` (the row index: every line found, Atropos' rollouts counted), the row table's
   first page and the first rollout's Conversation, the rest read when it is shown. A file that is one
   object (a SWE-agent ``.traj``, a mini-swe-agent ``.traj.json``, an Inspect ``.json`` log) is also measured
   in the shapes its producer writes, a **folder** of copies (at most 20,000 files; a small file then stops
   short of ``--mb``, said), against ``json.load`` of each file (``--no-folder`` skips it), in two layouts
   (``--folder-layout``): ``batches``, 100 files a subfolder (a folder of exported trajectories), and
   ``instances``, one subfolder a file (``<instance>/<instance>.traj``: how SWE-agent and mini-swe-agent lay
   out a run, where each folder's cost shows: resolving each for the visitor check cost ~140 us a folder).

   Beside each read line of a text-only format, the **floor** (``--no-floor`` skips it): the least any
   reader that hands on a Conversation of Python values must do, in a fresh process, every row's bytes
   read before the clock (no I/O counted, GC paused as the readers do): each row's text validated by
   msgspec with nothing built (decoded as ``msgspec.Raw``), and the values of that row's Conversation
   messages built by msgspec's generic decode of their JSON (written beside the file by the reader before
   the clock), less the time to validate that JSON alone (a reader's one pass reads the messages' text
   once). No I/O, task, tools, summary, no reader logic: a lower bound, in the same run as the baseline
   (printed beside it, not in it: the least reading the bytes costs, into one reused buffer),
   so a target under it is one that no reader built on Python's fastest JSON decoders meets (``orjson``
   decodes these rows no faster: docs/SPEED.md, round eight).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.3

MODEL = "Qwen/Qwen3-4B-Instruct-2507"
AGENT_SYSTEM = "You are opencode, an interactive CLI tool that helps users with software engineering tasks."
TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("bash", "write", "edit", "read")]


HISTORY_SYSTEM = AGENT_SYSTEM + " Use the tools." * 600  # ~9 KB, the size of opencode's own prompt
CALLS_PER_CONVERSATION = 50


def history(call: int) -> list[dict]:
    """The request messages of ``call`` when it repeats the conversation so far (``--history``)."""
    msgs = [{"role": "system", "content": HISTORY_SYSTEM}, {"role": "user", "content": "task " * 200}]
    for j in range((call - 1) % CALLS_PER_CONVERSATION):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{j}", "type": "function",
                     "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {j}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{j}", "content": f"output {j} " * 100})
    return msgs


def openenv_record(rng: random.Random, call: int, n_out: int, top_k: int = 5, with_history: bool = False) -> dict:
    """One upstream OpenEnv interception-proxy record (FORMATS §2.2; the fixture's shape, top-5)."""
    ids = [rng.randrange(151000) for _ in range(n_out)]
    ents = []
    for i in ids:
        lp = -rng.random() * 3
        # under --return-tokens-as-token-ids every alternative's bytes spell "token_id:N"
        tops = [{"token": f"token_id:{i + j}", "logprob": lp - j, "bytes": list(f"token_id:{i + j}".encode())}
                for j in range(top_k)]
        ents.append({"token": f"token_id:{i}", "logprob": lp, "bytes": list(f"<{i}>".encode()),
                     "top_logprobs": tops})
    message = {"role": "assistant", "reasoning_content": "thinking " * 20, "tool_calls": [
        {"id": f"c{call}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}
    request = {"model": MODEL, "stream": True, "logprobs": True, "top_logprobs": top_k,
               "messages": history(call) if with_history else [{"role": "system", "content": AGENT_SYSTEM},
                                                                 {"role": "user", "content": "task " * 200}],
               "tools": TOOLS, "tool_choice": "auto"}
    return {"turn": call, "request": request,
            "response": {"id": f"chatcmpl-{call}", "object": "chat.completion", "model": MODEL,
                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                         "usage": {"completion_tokens": n_out}},
            "completion_tokens": [e["token"] for e in ents], "completion_token_ids": [], "logprobs": ents,
            "per_token_logps": [e["logprob"] for e in ents], "finish_reason": "tool_calls",
            "latency_s": 1.5, "timestamp": 1780000000.0 + call}


def write_openenv_trace(path: Path, mb: float, calls: int, form: str, with_history: bool = False) -> tuple[int, float]:
    """A trace of about ``mb`` MB: ``calls`` records, the output length solved for the size. Written
    record by record (bounded memory). Returns (output tokens per call, MB written)."""
    rng = random.Random(1)
    per_1000 = len(json.dumps(openenv_record(rng, 1, 1000)))
    fixed = len(json.dumps(openenv_record(rng, 1, 0)))
    requests = sum(len(json.dumps(history(c))) for c in range(1, calls + 1)) / calls if with_history else 0
    n_out = max(1, int((mb * 1e6 / calls - fixed - requests) / ((per_1000 - fixed) / 1000)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("[" if form == "array" else "")
        for c in range(1, calls + 1):
            text = json.dumps(openenv_record(rng, c, n_out, with_history=with_history))
            f.write(text + "\n" if form == "jsonl" else ("," if c > 1 else "") + text)
        f.write("]" if form == "array" else "")
    return n_out, path.stat().st_size / 1e6


def replicate(src: Path, dest: Path, mb: float) -> tuple[str, int, float]:
    """``src``'s rows repeated until ``dest`` holds at least ``mb`` MB: a JSONL file's lines, a JSON
    array's elements; a file that is one JSON object (one rollout: a trajectory, a log) becomes JSONL
    of copies of it, one a line (``dest`` then ends in ``.jsonl``). Returns (how, rows, MB written)."""
    raw = src.read_bytes()
    text = raw.decode("utf-8-sig")
    body = text.lstrip()
    dest.parent.mkdir(parents=True, exist_ok=True)
    whole = None
    try:
        whole = json.loads(text)
    except ValueError:
        pass  # JSONL (or not JSON: the line check below says so)
    if isinstance(whole, list) and body.startswith("["):
        rows = [json.dumps(r, ensure_ascii=False).encode() for r in whole]
        if not rows:
            raise SystemExit(f"{src}: an empty array")
        copies = -(-int(mb * 1e6) // (sum(map(len, rows)) + len(rows)))
        with open(dest, "wb") as f:
            f.write(b"[" + b",".join(rows * copies) + b"]")
        return "a JSON array of its elements", len(rows) * copies, dest.stat().st_size / 1e6
    if isinstance(whole, dict):
        lines = [json.dumps(whole, ensure_ascii=False).encode()]
        how = "JSONL of copies of its one object"
    else:
        lines = [ln for ln in text.encode().split(b"\n") if ln.strip()]
        try:
            json.loads(lines[0])
        except (ValueError, IndexError):
            raise SystemExit(f"{src}: neither JSON nor JSONL") from None
        how = "JSONL of its lines"
    chunk = b"\n".join(lines) + b"\n"
    copies = -(-int(mb * 1e6) // len(chunk))
    with open(dest, "wb") as f:
        for _ in range(copies):
            f.write(chunk)
    return how, len(lines) * copies, dest.stat().st_size / 1e6


# ---------------------------------------------------------------- result checks (after the timing)
def digest(turns) -> str:
    """sha256 of (output ids, logprobs, top-k offsets, top-k ids, top-k logprobs, token bytes) per turn."""
    h = hashlib.sha256()
    for cols in turns:
        for code, col in zip("idiidB", cols):
            h.update(col if code == "B" else array(code, col).tobytes())
            h.update(b"|")
    return h.hexdigest()[:16]


def records_digest(recs: list) -> str:
    """The digest worked out from the stdlib's dicts by hand (not by the reader)."""
    out = []
    for r in recs:
        tops = [e["top_logprobs"] for e in r["logprobs"]]
        starts = [0]
        for ts in tops:
            starts.append(starts[-1] + len(ts))
        ids = [int(t["token"].removeprefix("token_id:")) for ts in tops for t in ts]
        out.append(([int(s.removeprefix("token_id:")) for s in r["completion_tokens"]], r["per_token_logps"],
                    starts, ids, [t["logprob"] for ts in tops for t in ts],
                    b"".join(bytes(e["bytes"]) for e in r["logprobs"])))
    return digest(out)


def rollout_digest(ro) -> str:
    turns = sorted(ro.turns, key=lambda t: t.origin.record)
    return digest([(t.output_ids, t.logprobs, t.top_logprobs.starts, t.top_logprobs.ids, t.top_logprobs.logprobs,
                    t.output_bytes.blob) for t in turns])


_CHILD = r"""
import json, os, sys, time
repo = sys.argv[3]
sys.path.insert(0, repo)


def hwm_mb():
    # VmHWM: this process image's peak RSS (ru_maxrss would carry the parent's over fork + exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024


mode, path = sys.argv[1], sys.argv[2]
from viewer.config import Settings
from viewer.sources import load_source, open_dataset
# every format module, fsspec and the Hub module: imports are not reading (~0.1 s, once); done before the clock
import fsspec.implementations.local, viewer.sources.hub, viewer.sources.registry  # noqa: F401,E401
if mode not in ("capture", "bare"):  # the fast row readers' numpy (viewer/sources/lazynumpy.py): an import too
    import numpy  # noqa: F401
# once per process, not reading either (~0.012 s): the format plug-ins' entry_points discovery (cached by the
# registry) and the capture module, which open_dataset imports to rule a capture record out
import viewer.sources.capture, viewer.row_browser  # noqa: F401,E401,E402
viewer.sources.registry.all_formats()
settings = Settings(max_file_mb=4096)
base = hwm_mb()
t0, c0 = time.perf_counter(), time.process_time()
out = obj = ro = None
if mode == "json-nogc":
    import gc
    gc.disable()  # the stricter baseline: no collections over the millions of new containers
if mode in ("json", "json-nogc", "json-check") and os.path.isdir(path):  # a folder of one-object files
    obj = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as f:
                obj.append(json.load(f))
    out = len(obj)
elif mode in ("json", "json-nogc", "json-check"):
    with open(path, "rb") as f:
        head = f.read(1 << 16).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        f.seek(0)
        if head == b"[":
            obj = json.load(f)
        else:  # JSONL: json.load refuses it; the stdlib parse of the same bytes is one json.loads a line
            obj = [json.loads(line) for line in f if line.strip()]
    out = len(obj)
elif mode in ("capture", "bare"):
    ro = load_source(path, settings)
    out = [len(ro.turns), sum(len(t.output_ids) for t in ro.turns), len(ro.problems)]
elif mode == "read":  # the reader alone: every row read and turned into its Conversation, no tokenising
    from viewer.sources.formats import RowRef
    src = open_dataset(path, settings)
    n = len(src.dataset)
    turns = tokens = 0
    for i in range(n):
        conv = src.format.read(src.dataset.read_row(i), RowRef(src.label, i))
        if conv.exact_turns is not None:
            turns += len(conv.exact_turns)
            tokens += sum(len(t.prompt_ids) + len(t.output_ids) for t in conv.exact_turns)
        else:
            turns += len(conv.messages)  # text only: messages (the turns come from tokenising)
    out = [n, src.format.name, turns, tokens]
elif mode == "open":  # what the app does to show a file: the first screen, no tokenising
    from viewer.row_browser import browse_page
    from viewer.sources.formats import RowRef
    src = open_dataset(path, settings)
    page = browse_page(src, 0)  # the row table's first page (the row count, 20 rows' summaries)
    row = src.default_row()
    conv = src.format.read(src.dataset.read_row(row), RowRef(src.label, row))  # the rollout shown first
    out = [len(src.dataset), src.format.name, len(page.rows), len(conv.exact_turns or conv.messages)]
elif mode == "floor-prep":  # (untimed) each row's Conversation messages as one JSON line, beside the file
    import msgspec
    from viewer.sources.formats import RowRef
    src = open_dataset(path, settings)
    with open(sys.argv[4], "wb") as f:
        for i in range(len(src.dataset)):
            conv = src.format.read(src.dataset.read_row(i), RowRef(src.label, i))
            if conv.exact_turns is not None:  # ids: the floor of building packed ids is another question
                out = "exact"
                break
            f.write(msgspec.json.encode(conv.messages) + b"\n")
        else:
            out = len(src.dataset)
elif mode == "floor":  # the least any reader does: each row validated (nothing built), its messages' values built
    import gc
    import msgspec

    skip, build = msgspec.json.Decoder(msgspec.Raw).decode, msgspec.json.Decoder().decode  # (Raw: checked, unbuilt)
    with open(sys.argv[4], "rb") as f:  # before the clock: the messages' JSON, and every row's bytes (no I/O
        convs = f.read().splitlines()  # timed: any reader pays some, so the floor stays under every reader)
    if os.path.isdir(path):
        texts = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                with open(os.path.join(root, name), "rb") as f:
                    texts.append(f.read())
    else:
        with open(path, "rb") as f:
            texts = [line for line in f.read().split(b"\n") if line.strip()]
    gc.disable()  # as the readers do
    t0, c0 = time.perf_counter(), time.process_time()  # (restarted)
    for text in texts:  # (a stored row may hold several rollouts: an Inspect log's samples, each a line of convs)
        skip(text)
    for conv in convs:
        build(conv)
    # A reader's one pass reads the messages' text once, not twice (the row's check, then the build): the
    # messages' own check, timed alone, is taken off (the clock's start moved on by it)
    t1, c1 = time.perf_counter(), time.process_time()
    for conv in convs:
        skip(conv)
    t0, c0 = t0 + time.perf_counter() - t1, c0 + time.process_time() - c1
    # Beside it, not in it: the least reading the bytes costs (into one reused buffer, nothing kept or split)
    buf = bytearray(max(1 << 20, max(map(len, texts))))
    io0 = time.process_time()
    for name in ([os.path.join(r, n) for r, _, ns in os.walk(path) for n in ns] if os.path.isdir(path) else [path]):
        with open(name, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    io_s = time.process_time() - io0
    t0, c0 = t0 + io_s, c0 + io_s  # (its wall time is the same CPU time, near enough)
    out = [len(texts), len(convs), io_s]
elif mode == "rows":
    src = open_dataset(path, settings)
    n = len(src.dataset)
    turns = tokens = 0
    for i in range(n):
        r = src.rollout(i)
        turns += len(r.turns)
        tokens += sum(len(t.prompt_ids) + len(t.output_ids) for t in r.turns)
    out = [n, src.format.name, turns, tokens]
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = hwm_mb()
check = None
if mode == "json-check" or mode in ("capture", "bare"):
    sys.path.insert(0, repo + "/bench")
    import bench_formats  # the result check, after the timing and the peak
    check = bench_formats.records_digest(obj) if obj is not None else bench_formats.rollout_digest(ro)
print(json.dumps({"out": out, "s": dt, "cpu_s": cpu, "base_mb": base, "peak_mb": peak, "check": check}))
"""


BLAS_THREADS = "1"  # the children's OPENBLAS_NUM_THREADS (module doc; --blas-threads)


def child(mode: str, path: Path, side: Path | None = None) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=BLAS_THREADS) if BLAS_THREADS else None
    extra = [str(side)] if side is not None else []
    r = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path), str(REPO), *extra], capture_output=True,
                       text=True, timeout=3600, env=env)
    if r.returncode:
        raise SystemExit(f"{mode} {path}: failed: {r.stderr.strip()[-1500:]}")
    return json.loads(r.stdout)


def verdict(x: float) -> str:
    return f"{x:.2f}x ({'met' if x <= TARGET else 'NOT met'})"


def compare(label: str, path: Path, size_mb: float, mode: str, repeat: int, open_path: Path | None = None,
            floor: bool = False) -> bool:
    """``repeat`` alternating pairs of fresh processes (the stdlib on ``path``, the reader on ``open_path``,
    default ``path``); prints each pair and the
    medians. ``floor``: a third process each time, the floor (module doc), for a text-only format. Returns
    whether every reader run's figures meet both targets."""
    print(f"\n[{label}] {size_mb:.1f} MB, {repeat} alternating runs in fresh processes; load average "
          f"{os.getloadavg()[0]:.1f}")
    cpu_r, nogc_r, rss_r, floor_r, ok = [], [], [], [], True
    file_mib = size_mb / 1.048576
    side = _floor_side(path) if floor else None
    for k in range(repeat):
        j, jn, me = child("json", path), child("json-nogc", path), child(mode, open_path or path)
        fl = child("floor", path, side) if side else None
        c, cn, m = me["cpu_s"] / j["cpu_s"], me["cpu_s"] / jn["cpu_s"], me["peak_mb"] / file_mib
        cpu_r.append(c)
        nogc_r.append(cn)
        rss_r.append(m)
        ok = ok and c <= TARGET and m <= TARGET
        at_floor = ""
        if fl:
            floor_r.append((fl["cpu_s"] / j["cpu_s"], me["cpu_s"] / fl["cpu_s"], fl["out"][2] / j["cpu_s"]))
            at_floor = (f" | floor {fl['cpu_s']:.2f} s CPU = {floor_r[-1][0]:.2f}x json's (reading the bytes, not "
                        f"in it: {floor_r[-1][2]:.2f}x more), the reader {floor_r[-1][1]:.2f}x the floor")
        print(f"[{label}] run {k + 1}: json {j['cpu_s']:.2f} s CPU ({j['s']:.2f} s wall), peak {j['peak_mb']:.0f} MB "
              f"({j['peak_mb'] / file_mib:.2f}x); json, GC paused {jn['cpu_s']:.2f} s CPU | reader {me['cpu_s']:.2f} s "
              f"CPU ({me['s']:.2f} s wall), peak {me['peak_mb']:.0f} MB (interpreter + imports {me['base_mb']:.0f} MB) "
              f"| CPU {verdict(c)} ({cn:.2f}x json with the GC paused), peak RSS {verdict(m)} | {me['out']}{at_floor}")
    at_floor = ""
    if floor_r:
        at_floor = (f"; FLOOR {statistics.median(f for f, _, _ in floor_r):.2f}x json's, reading the bytes "
                    f"{statistics.median(io for _, _, io in floor_r):.2f}x more (the reader "
                    f"{statistics.median(r for _, r, _ in floor_r):.2f}x the floor)")
    print(f"[{label}] ROW median of {repeat}: CPU {verdict(statistics.median(cpu_r))} json's "
          f"({statistics.median(nogc_r):.2f}x json's with the GC paused), peak RSS {verdict(statistics.median(rss_r))} "
          f"the file (target <= {TARGET}x both; worst CPU {max(cpu_r):.2f}x, worst RSS {max(rss_r):.2f}x){at_floor}; "
          f"load average {os.getloadavg()[0]:.1f}")
    if side:
        side.unlink()
    return ok


def _floor_side(path: Path) -> Path | None:
    """The rows' Conversation messages as JSON lines (what the floor builds), written beside ``path`` by the
    reader (untimed); None for a format with ids (its floor would be packed ids: not measured)."""
    side = path.parent / (path.name + ".floor-messages")
    got = child("floor-prep", path, side)
    if got["out"] == "exact":
        side.unlink()
        print("(no floor: the rows carry ids)")
        return None
    return side


def bench_openenv(tmp: Path, mb: float, calls: int, forms: list[str], repeat: int, bare: bool,
                  with_history: bool) -> bool:
    same = True
    for form in forms:
        form = form + ("+history" if with_history else "")
        folder = tmp / f"openenv-{form}"
        t0 = time.perf_counter()
        n_out, size = write_openenv_trace(folder / "trace.json", mb, calls, form.split("+")[0], with_history)
        print(f"\n[openenv-{form}] trace.json: {calls} calls x {n_out:,} output tokens, top-5 "
              f"= {calls * n_out:,} tokens, {size:.1f} MB (written in {time.perf_counter() - t0:.1f} s)")
        compare(f"openenv-{form} capture", folder / "trace.json", size, "capture", repeat, folder)
        if bare:
            compare(f"openenv-{form} bare file", folder / "trace.json", size, "bare", 1)
        want, got = child("json-check", folder / "trace.json")["check"], child("capture", folder)["check"]
        print(f"[openenv-{form}] result check: reader {got} vs json {want}: {'identical' if got == want else 'DIFFERENT'}")
        same = same and got == want
        (folder / "trace.json").unlink()
    return same


def _label(src: Path) -> str:
    """The file's path under tests/data/realworld (the producer's folder first), else its last two parts."""
    try:
        return src.resolve().relative_to(REPO / "tests" / "data" / "realworld").as_posix()
    except ValueError:
        return f"{src.parent.name}/{src.name}"


LAYOUTS = {"batches": 100, "instances": 1}  # files a subfolder (--folder-layout)


def bench_file(tmp: Path, src: Path, mb: float, repeat: int, rollout_repeat: int = 1, open_repeat: int = 0,
               folder: bool = True, layouts: tuple[str, ...] = tuple(LAYOUTS), floor: bool = True,
               own_rows: bool = True) -> None:
    label = _label(src)
    dest = tmp / "rows" / src.name
    one = _one_rollout_list(src)
    if one:  # a list that is one rollout (OpenHands events): its elements copied would be one 200 MB rollout
        print(f"\n[{label}] a JSON list that is one rollout: measured as a folder of copies only")
    elif not own_rows:
        how = "JSONL of copies of its one object" if _one_object(src) else "rows"
        if how == "rows":
            print(f"\n[{label}] --no-rows: a file of rows, which has no folder layout; not measured")
    else:
        t0 = time.perf_counter()
        how, rows, size = replicate(src, dest, mb)
        if how.startswith("JSONL") and not dest.name.endswith(".jsonl"):  # the row reader goes by the extension
            dest = dest.rename(dest.with_name(dest.name + ".jsonl"))
        print(f"\n[{label}] replicated as {how}: {rows:,} rows, {size:.1f} MB "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        compare(f"{label} read", dest, size, "read", repeat, floor=floor)
        if open_repeat:  # what showing the file costs: the same comparison, for the first screen
            compare(f"{label} open (first screen)", dest, size, "open", open_repeat)
        rollout_line(label, dest, size, rollout_repeat)
        dest.unlink()
    if not ((one or how == "JSONL of copies of its one object") and folder):
        return
    for layout in layouts:  # the producer's shapes: a file a rollout
        where, per = tmp / "folder", LAYOUTS[layout]
        t0 = time.perf_counter()
        files, size = replicate_folder(src, where, mb, per)
        name = "folder" if layout == "batches" else f"folder ({layout})"
        print(f"\n[{label}] replicated as a folder of {files:,} copies of the file (what the producer writes), "
              f"{per} a subfolder, {size:.1f} MB (written in {time.perf_counter() - t0:.1f} s)")
        compare(f"{label} {name} read", where, size, "read", repeat, floor=floor)
        if open_repeat:
            compare(f"{label} {name} open (first screen)", where, size, "open", open_repeat)
        shutil.rmtree(where)


def _one_object(src: Path) -> bool:
    """Whether ``src`` is one JSON object (one rollout: replicate makes JSONL of copies of it)."""
    try:
        return isinstance(json.loads(src.read_bytes()), dict)
    except ValueError:
        return False


def _one_rollout_list(src: Path) -> bool:
    """Whether ``src`` is a JSON list the row layer reads as one rollout (jsonio.rows_of_json: chat messages,
    OpenHands events), not a list of rows."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from viewer.sources.jsonio import rows_of_json

    try:
        whole = json.loads(src.read_bytes())
    except ValueError:
        return False
    return isinstance(whole, list) and len(whole) > 1 and len(rows_of_json(whole)) == 1


FOLDER_FILES = 20_000  # at most this many files a folder (a small file stops short of --mb, said)


def replicate_folder(src: Path, dest: Path, mb: float, per: int = 100) -> tuple[int, float]:
    """Copies of the one-object file ``src`` in ``dest``, ``per`` a subfolder, until they hold ``mb`` MB or
    FOLDER_FILES files. Returns (files, MB written)."""
    data = src.read_bytes()
    n = min(FOLDER_FILES, -(-int(mb * 1e6) // len(data)))
    for i in range(n):
        sub = dest / f"{i // per:06d}"
        if i % per == 0:
            sub.mkdir(parents=True)
        (sub / f"{i:06d}{''.join(src.suffixes)}").write_bytes(data)
    return n, n * len(data) / 1e6


def rollout_line(label: str, path: Path, size_mb: float, repeat: int) -> None:
    """The whole ``rollout(i)`` of every row (read + derive: text-only rows tokenised through the chat
    template), beside the reader's figures: what a scan over the rows costs, not a target."""
    file_mib = size_mb / 1.048576
    for k in range(repeat):
        j, me = child("json", path), child("rows", path)
        print(f"[{label}] rollout run {k + 1} (not a target): json {j['cpu_s']:.2f} s CPU | every rollout(i) "
              f"{me['cpu_s']:.2f} s CPU ({me['s']:.2f} s wall) = {me['cpu_s'] / j['cpu_s']:.2f}x json's, peak "
              f"{me['peak_mb']:.0f} MB ({me['peak_mb'] / file_mib:.2f}x the file) | {me['out']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200, help="size of each file (default 200 MB)")
    ap.add_argument("--calls", type=int, default=400, help="records in the OpenEnv trace (default 400)")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs per file (default 3)")
    ap.add_argument("--form", default="jsonl,array", help="OpenEnv trace container(s): jsonl, array")
    ap.add_argument("--bare", action="store_true", help="also open the bare trace.json (load_source(file))")
    ap.add_argument("--history", action="store_true", help="requests repeat the conversation so far")
    ap.add_argument("--skip-openenv", action="store_true", help="only the --format-file benches")
    ap.add_argument("--format-file", type=Path, action="append", default=[],
                    help="a row-format file (JSONL or a JSON array) to replicate and bench; repeatable")
    ap.add_argument("--rollout-repeat", type=int, default=1,
                    help="runs of the whole rollout(i) line per --format-file (default 1; 0 skips it)")
    ap.add_argument("--open-repeat", type=int, default=0,
                    help="alternating runs of the open line (open_dataset, the row table's first page, the first "
                         "rollout's Conversation) per --format-file (default 0: skipped)")
    ap.add_argument("--no-folder", action="store_true",
                    help="skip the folder line of a one-object file (a folder of copies, as SWE-agent writes them)")
    ap.add_argument("--folder-layout", default=",".join(LAYOUTS),
                    help="the folder shapes measured: batches (100 files a subfolder), instances (a subfolder a "
                         "file, as SWE-agent and mini-swe-agent write a run); default both")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floor line (the least any reader does: each row validated, its messages built)")
    ap.add_argument("--no-rows", action="store_true",
                    help="skip the file's own rows line (JSONL / array): only the folder layouts of a one-object file")
    ap.add_argument("--blas-threads", default=BLAS_THREADS,
                    help="OPENBLAS_NUM_THREADS of every child (default 1; empty: the environment's, as before)")
    args = ap.parse_args()
    if unknown := set(args.folder_layout.split(",")) - set(LAYOUTS) - {""}:
        ap.error(f"--folder-layout: unknown {', '.join(sorted(unknown))} (known: {', '.join(LAYOUTS)})")
    globals()["BLAS_THREADS"] = args.blas_threads
    with tempfile.TemporaryDirectory() as d:
        if not args.skip_openenv and not bench_openenv(Path(d), args.mb, args.calls, args.form.split(","),
                                                       args.repeat, args.bare, args.history):
            raise SystemExit("the reader's columns differ from json's")
        for src in args.format_file:
            try:
                bench_file(Path(d), src, args.mb, args.repeat, args.rollout_repeat, args.open_repeat,
                           not args.no_folder, tuple(x for x in args.folder_layout.split(",") if x),
                           not args.no_floor, not args.no_rows)
            except SystemExit as e:  # one file the reader refuses (or that is not rows) does not stop the others
                print(f"[{_label(src)}] not measured: {e}")


if __name__ == "__main__":
    main()
