"""Hugging Face Space entry point: `python app.py` serves Rollout Inspector on its bundled sample.

The same launch path as `rollout-inspector view` (viewer/cli/view.py: serve); `demo` and `LAUNCH_KWARGS`
stay module-level for the tests that launch the app as this file does."""
from viewer.cli.view import quiet_defaults, serve

quiet_defaults()  # no analytics or telemetry: set before gradio builds any Blocks

from viewer.config import Settings  # noqa: E402
from viewer.ui import create_app, launch_kwargs  # noqa: E402

settings = Settings.from_env()
demo = create_app(settings)
LAUNCH_KWARGS = launch_kwargs(settings)

if __name__ == "__main__":
    # stopping the app stops a running capture first (no orphans); host and port from GRADIO_SERVER_NAME/_PORT
    raise SystemExit(serve(settings, demo=demo))
