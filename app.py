"""Hugging Face Space entry point: `python app.py` serves Rollout Inspector on its bundled sample."""
import os

# Offline by default: no analytics or telemetry; set before gradio builds any Blocks.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # tokenizers only: no "PyTorch was not found"

from viewer.config import Settings  # noqa: E402
from viewer.ui import create_app, launch_kwargs  # noqa: E402

settings = Settings.from_env()
demo = create_app(settings)
LAUNCH_KWARGS = launch_kwargs(settings)

if __name__ == "__main__":
    from viewer.capture.runner import install_shutdown_handlers

    install_shutdown_handlers()  # stopping the app stops a running capture first (no orphans)
    # The bundled example deck (docs/TALK.md): presenter mode, five steps, → / ← to walk them
    from viewer.visitor import SAMPLE_DECK

    port = os.environ.get("GRADIO_SERVER_PORT", "7860")
    print(f"Example talk deck: http://127.0.0.1:{port}/?deck={SAMPLE_DECK}", flush=True)
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), **LAUNCH_KWARGS)
