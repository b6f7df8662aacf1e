"""Public hosting rules (viewer/capture/policy.py), worked out by hand from docs/HOSTING.md's Hosting section."""
from __future__ import annotations

import socket

import pytest

from viewer.capture.policy import check_endpoint, check_start, is_public
from viewer.config import Settings


def test_public_mode_is_on_for_a_space_or_the_setting():
    assert is_public(Settings(), {"SPACE_ID": "me/app"}) and is_public(Settings(public=True), {})
    assert not is_public(Settings(), {})
    assert Settings.from_env({"VIEWER_PUBLIC": "0"}).public is False  # "0" is off, not a truthy string
    assert Settings.from_env({"VIEWER_PUBLIC": "1"}).public is True


@pytest.mark.parametrize("backend", ["local", "endpoint", "hf-jobs"])
def test_public_without_sign_in_starts_nothing(backend):
    d = check_start(Settings(), backend, public=True, endpoint="https://example.org")
    assert not d.allowed and d.needs_login and "Sign in with Hugging Face" in d.message


def test_public_hf_jobs_uses_the_visitors_token_never_the_spaces(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_SPACE_OWN_TOKEN")
    d = check_start(Settings(), "hf-jobs", public=True, username="alice", oauth_token="hf_alice_oauth",
                    typed_token="hf_typed")
    assert d.allowed and d.token == "hf_alice_oauth" and d.owner == "alice"
    d = check_start(Settings(), "hf-jobs", public=True, username="alice", oauth_token="")
    assert not d.allowed and d.token == ""


@pytest.mark.parametrize("backend", ["local", "endpoint"])
def test_public_local_and_endpoint_need_the_allow_list(backend):
    d = check_start(Settings(), backend, public=True, username="mallory", oauth_token="t",
                    endpoint="http://8.8.8.8:8000")
    assert not d.allowed and "CAPTURE_ALLOW_USERS" in d.message and f"The {backend} backend is off" in d.message
    ok = check_start(Settings(capture_allow_users="Alice, bob"), backend, public=True, username="alice",
                     oauth_token="t", endpoint="http://8.8.8.8:8000")
    assert ok.allowed


@pytest.mark.parametrize("url,public,refused", [
    ("http://127.0.0.1:8000", True, "internal address"),
    ("http://localhost:8000", True, "internal address"),
    ("http://10.1.2.3", True, "internal address"),
    ("http://192.168.0.5:80", True, "internal address"),
    ("http://169.254.169.254/latest/meta-data", True, "internal address"),
    ("http://[::1]:8000", True, "internal address"),
    ("file:///etc/passwd", True, "http:// or https://"),
    ("gopher://x", False, "http:// or https://"),
    ("http://8.8.8.8:8000", True, None),
    ("http://127.0.0.1:8000", False, None),  # a developer's own machine may use its loopback
])
def test_endpoint_urls(url, public, refused):
    why = check_endpoint(url, public)
    assert (why is None) if refused is None else (refused in why), why


def test_endpoint_name_resolving_to_a_private_address_is_refused():
    def fake(host, port, proto=0):  # a public-looking name that resolves inside (DNS rebinding)
        return [(socket.AF_INET, socket.SOCK_STREAM, proto, "", ("10.0.0.7", port))]

    assert "10.0.0.7" in check_endpoint("https://innocent.example", True, resolve=fake)
