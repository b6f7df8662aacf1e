"""``python -m viewer view [SOURCE_OR_FOLDER]``: serve the app, opened on a source, its folder as the data root.

:func:`serve` is also how ``app.py`` (the Space's entry) runs: one launch path, whether the app was
installed with pip or runs from the repository. It starts the built app on loopback (or ``--host``),
prints the URL, and blocks until Ctrl-C or SIGTERM; then a running capture is cancelled first and the
server closed, so nothing is left behind. gradio is imported only here, inside the functions: the rest of
the command line never loads it (tests/test_layering.py).
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from viewer.config import SAMPLE_DIR, Settings
from viewer.layout import DECK, is_capture_dir

from .common import OK, CliError, add_common, print_json

__all__ = ["add_parser", "quiet_defaults", "view_target", "serve", "VIEW_KEYS"]

VIEW_KEYS = ("url", "source", "data_root", "captures", "public")  # `view --json` (docs/CLI.md)


def quiet_defaults() -> None:
    """No analytics or telemetry, and no transformers advice about PyTorch (the viewer needs tokenizers only);
    set before gradio builds any Blocks. A variable the user set keeps its value."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def view_target(target: str) -> tuple[Path, Path]:
    """(data root, what opens on start) for ``view TARGET``. The data root is the folder named (a file's
    own folder): typed paths, links and scans stay inside it. A capture folder or a file opens itself;
    another folder opens its first capture folder by name, else the bundled sample. CliError when
    ``target`` does not exist."""
    p = Path(target).expanduser()
    if not p.exists():
        raise CliError(f"{target}: no such file or folder")
    p = p.resolve()
    if p.is_file():
        return p.parent, p
    if is_capture_dir(p):
        return p, p
    captures = sorted(c for c in p.iterdir() if c.is_dir() and is_capture_dir(c))
    return p, (captures[0] if captures else Path(Settings().sample))


def _shown_source(sample: str) -> str:
    """What opens on start, as a link names it: ``sample:NAME`` for a bundled sample, else the path."""
    p = Path(sample)
    return f"sample:{p.name}" if p.parent == SAMPLE_DIR else sample


def serve(settings: Settings, demo: Any = None, host: str | None = None, port: int | None = None,
          open_browser: bool = False, as_json: bool = False) -> int:
    """Launch ``demo`` (default: the app built from ``settings``), print its URL, block until Ctrl-C or
    SIGTERM, then stop: a running capture cancelled first (viewer/capture/runner.py), then the server.
    ``host`` defaults to ``GRADIO_SERVER_NAME``, else loopback; ``port`` to Gradio's choice
    (``GRADIO_SERVER_PORT``, else the first free port from 7860). Returns the exit code (0)."""
    quiet_defaults()
    from viewer.capture.runner import install_shutdown_handlers
    from viewer.ui import create_app, launch_kwargs

    host = host or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"
    try:  # Ctrl-C while the app is built (seconds) stops as quietly as once it serves
        if demo is None:
            demo = create_app(settings)
        install_shutdown_handlers()  # Ctrl-C / SIGTERM: the capture stops first, then KeyboardInterrupt here
        # quiet: Gradio's own lines would offer a share link (this app is offline); the URL is printed below
        try:
            _, url, _ = demo.launch(server_name=host, server_port=port, prevent_thread_lock=True, quiet=True,
                                    inbrowser=open_browser, **launch_kwargs(settings))
        except OSError as e:  # Gradio's text names its launch() arguments, not this command's options
            where = f"port {port}" if port else "a free port from 7860"
            raise CliError(f"{host}: cannot listen on {where} (taken, or not this machine's address: "
                           f"{str(e).split('. ')[0]}); choose another with --port / --host") from None
        _announce(settings, url, as_json)
        threading.Event().wait()  # until a signal raises KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    finally:
        if demo is not None:
            demo.close(verbose=False)  # a no-op when it never started
    if not as_json:
        print("Rollout Inspector stopped.", flush=True)
    return OK


def _announce(settings: Settings, url: str, as_json: bool) -> None:
    source = _shown_source(settings.sample)
    if as_json:
        print_json(dict(zip(VIEW_KEYS, (url, source, settings.data_root, settings.capture_out_root,
                                        settings.public_mode()))))
    else:
        print(f"Rollout Inspector: {url}  (Ctrl-C stops it)", f"  opened on start: {source}",
              f"  data root (typed paths, links and scans stay inside it): {settings.data_root}",
              f"  captures are written to: {settings.capture_out_root}", sep="\n")
        if settings.mcp:  # Gradio's MCP server (viewer/ui/agent_api.py): streamable HTTP, or …/sse
            print(f"  MCP tools for agents: {url.rstrip('/')}/gradio_api/mcp/")
        if source.startswith("sample:") and (SAMPLE_DIR / DECK).is_file():
            # the bundled example deck (docs/TALK.md): presenter mode, five steps, → / ← to walk them
            from viewer.visitor import SAMPLE_DECK

            print(f"  example talk deck: {url.rstrip('/')}/?deck={SAMPLE_DECK}")
    sys.stdout.flush()


def _env(name: str) -> str:
    return next(env for field, env, _, _ in Settings.docs() if field == name)


def _cmd_view(args: argparse.Namespace, settings: Settings) -> int:
    if args.source is not None:
        root, sample = view_target(args.source)
        # in the environment, not only in this Settings: every part that reads the settings itself
        # (Settings.from_env()) sees the same data root
        os.environ[_env("data_root")], os.environ[_env("sample")] = str(root), str(sample)
        settings = Settings.from_env()
    if args.mcp:  # the agent endpoints as MCP tools (viewer/ui/agent_api.py), as VIEWER_MCP=1 does
        os.environ[_env("mcp")] = "1"
        settings = Settings.from_env()
    if args.follow:  # the page follows what opens on start (viewer/live.py), as ?source=…&follow=1 does
        if args.source is None:
            raise CliError("--follow needs SOURCE_OR_FOLDER: the capture folder, trace or turns file to follow")
        from viewer.live import follow_start
        from viewer.sources.follow import followable

        why = followable(Path(settings.sample), settings)
        if why:
            raise CliError(f"--follow: {why}")
        follow_start()
    return serve(settings, host=args.host, port=args.port, open_browser=args.open, as_json=args.json)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("view", help="serve the app on a capture folder, a file or a folder of them (default: the "
                                    "bundled sample); Ctrl-C stops it",
                       description="Serve the app on SOURCE_OR_FOLDER: a capture folder or a file opens on start; "
                                   "the folder named (a file's own folder) is the data root, the only place typed "
                                   "paths, links and scans may read; a folder of captures opens its first. Without "
                                   "it: the bundled sample (VIEWER_SAMPLE, VIEWER_DATA_ROOT).")
    s.add_argument("source", metavar="SOURCE_OR_FOLDER", nargs="?", default=None,
                   help="capture folder, trace/turns or dataset file, or a folder of them")
    add_common(s)
    s.add_argument("--host", default=None, help="address to listen on (default: GRADIO_SERVER_NAME, else "
                                                 "127.0.0.1; 0.0.0.0 serves every network the machine is on)")
    s.add_argument("--port", type=int, default=None, help="port (default: GRADIO_SERVER_PORT, else the first free "
                                                           "port from 7860)")
    s.add_argument("--open", action="store_true", help="open the URL in a browser tab")
    s.add_argument("--follow", action="store_true", help="keep reading SOURCE as it grows (a capture being recorded, "
                                                          "a trace.json or JSONL being written): new records appear "
                                                          "in the open page within a few seconds")
    s.add_argument("--mcp", action="store_true", help="also serve the token-evidence endpoints (search_dataset, "
                                                       "rollout_summary, turn_tokens, rollout_drift, rollout_lint) as "
                                                       "MCP tools at URL/gradio_api/mcp/ (VIEWER_MCP=1)")
    s.set_defaults(func=_cmd_view)
