"""One settings object: every knob of the app and CLI, its default, env override and help.

Read once with :func:`Settings.from_env`. ``tests/test_config.py`` checks that every
setting is documented, with its default and this help text, in docs/SETTINGS.md.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "REPO_ROOT", "SAMPLE_DIR", "IN_CHECKOUT", "DATA_DIR", "CACHE_DIR", "user_dir", "LOW_LOGPROB",
           "env_flag", "TRUE_WORDS", "FALSE_WORDS"]

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
APP_DIR_NAME = "rollout-inspector"


def user_dir(kind: str, environ: dict[str, str] | None = None) -> Path:
    """This app's per-user folder of ``kind`` ``"data"`` or ``"cache"``, as the XDG base directory spec
    places them: ``$XDG_DATA_HOME`` (else ``~/.local/share``) or ``$XDG_CACHE_HOME`` (else ``~/.cache``),
    then ``rollout-inspector``. A relative XDG value is ignored, as the spec says."""
    env = os.environ if environ is None else environ
    var, fallback = {"data": ("XDG_DATA_HOME", (".local", "share")), "cache": ("XDG_CACHE_HOME", (".cache",))}[kind]
    base = env.get(var, "")
    return (Path(base) if base and Path(base).is_absolute() else Path.home().joinpath(*fallback)) / APP_DIR_NAME


# Run from the repository (a clone: pyproject.toml and sample_data/ beside the package), every path stays where
# the Makefile, the scripts and the tests expect it. Installed (`pip install`: the package inside site-packages),
# the bundled samples are the package's own data (pyproject.toml maps sample_data/ to viewer/sample_data/) and
# what the app writes goes to per-user folders: nothing is ever written inside site-packages.
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "sample_data").is_dir()
SAMPLE_DIR = REPO_ROOT / "sample_data" if IN_CHECKOUT else PACKAGE_DIR / "sample_data"
DATA_DIR = REPO_ROOT / "out" if IN_CHECKOUT else user_dir("data")  # capture folders (CAPTURE_OUT_ROOT overrides)
CACHE_DIR = REPO_ROOT / ".cache" if IN_CHECKOUT else user_dir("cache")  # CPU models built for captures, rescore


# the one default of the low-logprob threshold (functions that take ``low`` default to it)
LOW_LOGPROB = -2.5


# The spellings of a yes/no environment variable (bool("0") is True, so they are parsed, in one place).
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def env_flag(name: str, raw: str | None, default: bool = False) -> bool:
    """A yes/no environment variable's value: ``1 true yes on`` / ``0 false no off`` (any case, spaces
    ignored), unset or empty = ``default``. Anything else raises ValueError naming the variable: a
    typo like ``VIEWER_PUBLIC=ture`` must not quietly turn public mode off."""
    v = (raw or "").strip().lower()
    if not v:
        return default
    if v in TRUE_WORDS:
        return True
    if v in FALSE_WORDS:
        return False
    raise ValueError(f"{name}={raw!r}: not a yes/no value ({', '.join(TRUE_WORDS)} / {', '.join(FALSE_WORDS)})")


def _setting(default, env: str, help: str):
    return field(default=default, metadata={"env": env, "help": help})


@dataclass(frozen=True)
class Settings:
    data_root: str = _setting(str(SAMPLE_DIR), "VIEWER_DATA_ROOT",
                              "Typed local paths must resolve inside this folder; anything else is refused.")
    sample: str = _setting(str(SAMPLE_DIR / "smollm2"), "VIEWER_SAMPLE",
                           "Capture folder (or file) the app opens on start.")
    max_upload_mb: int = _setting(100, "VIEWER_MAX_UPLOAD_MB",
                                  "Largest upload accepted (per file, zip included), in MB.")
    max_file_mb: int = _setting(150, "VIEWER_MAX_FILE_MB",
                                "Largest single trace file a reader will parse, in MB (also the zip's total uncompressed size).")
    page_tokens: int = _setting(20000, "VIEWER_PAGE_TOKENS",
                                "Tokens painted per page in the token view; longer turns are paged.")
    context_tail: int = _setting(512, "VIEWER_CONTEXT_TAIL",
                                 "Prompt tokens shown when the context is collapsed to its tail.")
    low_logprob: float = _setting(LOW_LOGPROB, "VIEWER_LOW_LOGPROB",
                                  "Tokens below this logprob are flagged as low-probability.")
    tokenizer: str = _setting("", "VIEWER_TOKENIZER",
                              "Tokenizer override: qwen3, a local directory, or a Hub name (Hub only when online).")
    hub_cache: str = _setting("", "VIEWER_HUB_CACHE",
                              "Folder where files fetched from the Hub are cached (default: a folder in the system temp dir).")
    ray_num_cpus: int = _setting(2, "VIEWER_RAY_NUM_CPUS",
                                 "Drift scans on Ray (--engine ray) without a cluster address: CPUs of the embedded "
                                 "local Ray.")
    ray_object_store_mb: int = _setting(128, "VIEWER_RAY_OBJECT_STORE_MB",
                                        "Object store of the embedded local Ray, in MB (blocks are small: per-turn "
                                        "rows).")
    scan_workers: int = _setting(0, "VIEWER_SCAN_WORKERS",
                                 "Processes a local drift scan runs its chunks of rollouts in (forked, the tokenizer "
                                 "shared); 0 = one per CPU core, 1 = in the calling process.")
    ray_workers: int = _setting(2, "VIEWER_RAY_WORKERS",
                                "Ray actors scanning blocks at once (each holds its own tokenizers); on a cluster, "
                                "raise it to the CPUs to use.")
    plot_defer_s: float = _setting(0.4, "VIEWER_PLOT_DEFER_S",
                                   "Seconds the plots are sent after a turn's token view, so tokens are hoverable before "
                                   "plotly's first draw blocks the page; 0 = one answer with everything.")
    gradio_seam: bool = _setting(True, "VIEWER_GRADIO_SEAM",
                                 "Gradio's internals that the app patches or reads for speed (viewer/ui/seam.py, "
                                 "docs/GRADIO.md §7); off = Gradio's own behaviour throughout: slower with many "
                                 "visitors, a closed tab's State kept Gradio's hour, Hub reads without the sign-in.")
    cache_mb: float = _setting(512.0, "VIEWER_CACHE_MB",
                               "Memory for parsed rollouts and what is derived from them (token-view payloads, plots, "
                               "drift reports) and the tokenizers loaded from folders (uploads' tokenizer/, each with "
                               "its token table, counted once), shared by all visitors; least recently used out "
                               "first, in MB.")
    browse_concurrency: int = _setting(16, "VIEWER_BROWSE_CONCURRENCY",
                                       "Browsing events (open, select a turn, filter, drift of a turn) the app runs "
                                       "at once; long work (scans, captures) has its own queue of one.")
    public: bool = _setting(False, "VIEWER_PUBLIC",
                            "Public mode (also on whenever SPACE_ID is set, i.e. on a Hugging Face Space): local and "
                            "endpoint captures off, hf-jobs only under the visitor's own sign-in.")
    mcp: bool = _setting(False, "VIEWER_MCP",
                         "Serve the app's token-evidence endpoints (search_dataset, rollout_summary, turn_tokens, "
                         "rollout_drift, rollout_lint) as MCP tools at /gradio_api/mcp/ (Gradio's MCP server; "
                         "view --mcp); in public mode under a visitor's checks and budgets.")
    capture_allow_users: str = _setting("", "CAPTURE_ALLOW_USERS",
                                        "Public mode: comma-separated Hugging Face usernames who, once signed in, may "
                                        "also use the local and endpoint capture backends.")
    capture_max_wall_s: float = _setting(1800.0, "CAPTURE_MAX_WALL_S",
                                         "Wall-clock limit for one whole capture started from the app, in seconds "
                                         "(then it is cancelled).")
    # --- rescore (viewer/rescore/): the trainer's forward pass over the trainer rows ---
    rescore_flag_delta: float = _setting(0.2, "VIEWER_RESCORE_FLAG",
                                         "Rescore: tokens whose trainer and sampler logprobs differ by more than this "
                                         "(in absolute value) are flagged "
                                         "(0.2 ≈ a ratio outside PPO/GRPO's clip range 1 ± 0.2).")
    rescore_device: str = _setting("auto", "VIEWER_RESCORE_DEVICE",
                                   "Rescore device: auto (CUDA when present, else CPU), cpu, cuda.")
    rescore_dtype: str = _setting("auto", "VIEWER_RESCORE_DTYPE",
                                  "Rescore dtype: auto (the model config's, as the sampler loads it), float32, "
                                  "bfloat16, float16.")
    rescore_batch_tokens: int = _setting(0, "VIEWER_RESCORE_BATCH_TOKENS",
                                         "Rescore: rows per forward pass are packed up to this many (padded) tokens; "
                                         "0 = one row per pass on CPU (compute-bound: padding only adds work), "
                                         "16384 on CUDA.")
    # --- capture (viewer/capture/) ---
    capture_model: str = _setting("tiny-qwen3", "CAPTURE_MODEL",
                                  "Capture model: tiny-qwen3 / smollm2 (CPU, built offline), a model folder or Hub name.")
    capture_out_root: str = _setting(str(DATA_DIR / "captures"), "CAPTURE_OUT_ROOT",
                                     "Folder where the Capture tab writes capture folders; unset while "
                                     "VIEWER_DATA_ROOT is set: its captures/ subfolder.")
    capture_agent_timeout_s: float = _setting(300.0, "CAPTURE_AGENT_TIMEOUT_S",
                                              "Wall-clock limit for one opencode run, in seconds.")
    capture_test_timeout_s: float = _setting(10.0, "CAPTURE_TEST_TIMEOUT_S",
                                             "Limit per held-out test run of solution.py, in seconds.")
    capture_max_output_tokens: int = _setting(1024, "CAPTURE_MAX_OUTPUT_TOKENS",
                                              "opencode's limit.output: max_tokens of each model call.")
    capture_top_logprobs: int = _setting(5, "CAPTURE_TOP_LOGPROBS",
                                         "top_logprobs the recording proxy asks for (<= the server's --max-logprobs).")
    capture_logprobs_mode: str = _setting("", "CAPTURE_LOGPROBS_MODE",
                                          "vLLM --logprobs-mode for local servers; empty = raw_logprobs when scripted "
                                          "(the model's own values), else processed_logprobs.")
    capture_vllm_python: str = _setting("", "CAPTURE_VLLM_PYTHON",
                                        "Python of the vLLM environment (default .venv-vllm/bin/python).")
    capture_opencode: str = _setting("", "CAPTURE_OPENCODE",
                                     "opencode binary (default: the one scripts/setup_capture.sh installs).")
    capture_auto_setup: bool = _setting(True, "CAPTURE_AUTO_SETUP",
                                        "Install the capture environment (vLLM env, opencode; scripts/setup_capture.sh) "
                                        "when a capture first needs it; off = the capture fails and says how to.")
    capture_hf_flavor: str = _setting("a100-large", "CAPTURE_HF_FLAVOR",
                                      "Hugging Face Jobs hardware flavor for --backend hf-jobs.")
    capture_results_repo: str = _setting("", "CAPTURE_RESULTS_REPO",
                                         "Dataset repo an hf-jobs capture pushes its artefacts to (OWNER/NAME).")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        kwargs = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            if isinstance(f.default, bool):
                kwargs[f.name] = env_flag(f.metadata["env"], raw, f.default)
                continue
            try:
                kwargs[f.name] = type(f.default)(raw)
            except ValueError:
                what = "a whole number" if isinstance(f.default, int) else "a number"
                raise ValueError(f"{f.metadata['env']}={raw!r}: not {what}") from None
        # A data root of one's own holds the captures made here too, so the app that made one lists and opens it
        # with the rest of the data (issue 41, point 12); CAPTURE_OUT_ROOT, when set, still wins.
        if "data_root" in kwargs and "capture_out_root" not in kwargs:
            kwargs["capture_out_root"] = str(Path(kwargs["data_root"]).expanduser() / "captures")
        return cls(**kwargs)

    def public_mode(self, environ: dict[str, str] | None = None) -> bool:
        """Public mode: the ``public`` setting, or running as a Hugging Face Space (``SPACE_ID``)."""
        env = os.environ if environ is None else environ
        return bool(self.public or env.get("SPACE_ID"))

    def limits(self, environ: dict[str, str] | None = None):
        """The resource budgets in force for this app (:func:`viewer.budgets.limits`): public-mode
        defaults when :meth:`public_mode`, each ``VIEWER_BUDGET_<NAME>`` overriding its default."""
        from viewer.budgets import limits

        return limits(public=self.public_mode(environ), environ=environ)

    @classmethod
    def docs(cls) -> list[tuple[str, str, object, str]]:
        """(name, env var, default, help) for every setting: docs/SETTINGS.md (checked by tests/test_config.py) and --help use it."""
        return [(f.name, f.metadata["env"], f.default, f.metadata["help"]) for f in fields(cls)]
