"""The app as a public Space (``SPACE_ID`` set), in chromium: no capture can be started without
signing in, local/endpoint are off and say why, the token field is gone, and nothing runs."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from capture_helpers import own_marked as marked  # a parallel run: this worker's processes

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def space_url(tmp_path_factory):
    port = free_port()
    out_root = tmp_path_factory.mktemp("space-captures")
    env = {**os.environ, "SPACE_ID": "tester/rollout-inspector", "SYSTEM": "spaces", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "CAPTURE_OUT_ROOT": str(out_root),
           # what a Space with `hf_oauth: true` provides; the provider is never contacted unless someone signs in
           "OAUTH_CLIENT_ID": "test-client", "OAUTH_CLIENT_SECRET": "test-secret", "OAUTH_SCOPES": "openid profile",
           "OPENID_PROVIDER_URL": "http://127.0.0.1:9"}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/", timeout=5, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
    yield url, out_root
    proc.terminate()
    proc.wait(30)


@pytest.mark.parametrize("backend", ["local", "endpoint", "hf-jobs"])
def test_public_space_asks_to_sign_in_and_starts_nothing(page, space_url, backend):
    url, out_root = space_url
    page.goto(url + "/")
    page.get_by_role("tab", name="Capture").click()
    page.locator("#capture-panel").wait_for()
    assert "captures run as Hugging Face Jobs on your own account" in page.locator("#capture-public-note").text_content()
    assert page.get_by_role("button", name="Sign in with Hugging Face").count() == 1
    assert page.locator("#capture-token").count() == 0 or not page.locator("#capture-token").is_visible()
    page.locator("#capture-backend input").fill(backend)
    page.keyboard.press("Enter")
    if backend == "endpoint":
        page.locator("#capture-endpoint textarea, #capture-endpoint input").first.fill("http://127.0.0.1:8000")
    page.locator("#capture-start").click()
    page.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('Sign in with Hugging Face"
                           " to start a capture')", timeout=30000)
    time.sleep(1.0)
    assert list(out_root.iterdir()) == [] and marked("capture-") == {}  # nothing was started
