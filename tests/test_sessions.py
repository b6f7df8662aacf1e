"""Two visitors on one server with a rollout cache of one: the second evicts the first's rollout,
and the first's next action re-opens it (right turn, right payload) instead of doing nothing."""
from __future__ import annotations

import json

import pytest

from viewer.config import SAMPLE_DIR, Settings
from viewer.sources import load_source


@pytest.fixture(scope="module")
def small_cache_app(tmp_path_factory):
    from conftest import free_port
    from viewer.ui import create_app, launch_kwargs

    settings = Settings(cache_rollouts=1)
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield url.rstrip("/")
    demo.close()


def test_evicted_rollout_is_reopened_for_its_session(small_cache_app):
    from gradio_client import Client

    a = Client(small_cache_app + "/", verbose=False)
    b = Client(small_cache_app + "/", verbose=False)
    tiny, smol = load_source(SAMPLE_DIR / "qwen3-tiny"), load_source(SAMPLE_DIR / "smollm2")
    a.predict("qwen3-tiny", "", api_name="/open_sample")
    b.predict("smollm2", "", api_name="/open_sample")  # the cache holds one rollout: a's is evicted
    for who, ro, idx in ((a, tiny, 2), (b, smol, 3), (a, tiny, 3)):
        turn, payload, _, _ = who.predict(idx, api_name="/select_turn")
        t = ro.turn(idx)
        d = json.loads(payload)
        assert turn == idx and d["turn"] == idx
        assert d["ids"] == list(t.prompt_ids) + list(t.output_ids)  # this session's rollout, not the other's
