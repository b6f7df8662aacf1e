"""The Datasets tab through the app's HTTP API: open a local Harbor file, page, open a row."""
import os
import shutil

import pytest

from _row_fixtures import HARBOR
from tv_payload import expand


@pytest.fixture(scope="module")
def ds_client(tmp_path_factory, realdata):
    from gradio_client import Client

    from conftest import free_port
    from viewer.config import Settings
    from viewer.ui import create_app, launch_kwargs

    root = tmp_path_factory.mktemp("dsroot")
    shutil.copy(HARBOR / "openhands__hello-world.traces.json", root / "harbor.json")
    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    settings = Settings(data_root=str(root))
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield Client(url, verbose=False)
    demo.close()


def test_open_local_harbor_file_and_select_row(ds_client):
    status, table, page = ds_client.predict("harbor.json", "auto", "", "", "", "", "", None, None, "row", False,
                                            api_name="/ds_open")
    assert "harbor" in status and page == 1
    assert [r[0] for r in table["data"]] == [0, 1] and table["data"][1][1] == "openhands"
    out = ds_client.predict(1, api_name="/ds_open_row")
    header, convo, done = out[0], out[-2], out[-1]
    assert "harbor.json row 1" in header and "Opened row 1" in done
    payload = expand(out[-4])
    assert payload["prompt_len"] > 0 and 1 in payload["k"]  # derived mask: the reply is trainable
    assert "str_replace_editor" in convo or "Turn" in convo


def test_bad_inputs_are_clear(ds_client):
    status, _, _ = ds_client.predict("/etc/passwd", "auto", "", "", "", "", "", None, None, "row", False,
                                     api_name="/ds_open")
    assert "outside the allowed data folder" in status
    status, _, _ = ds_client.predict("hf://datasets/13point5/opencode-rollouts-test", "auto", "", "", "", "", "",
                                     None, None, "row", False, api_name="/ds_open")
    assert "offline mode is on" in status
