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


def test_the_page_handlers_alone_open_filter_and_stay_within_the_pages(tmp_path, realdata):
    # DatasetHandlers without the app: what each page event answers (Widgets.page_outputs: the dataset
    # held, the status line, the rows, the page number), expected rows from the raw file.
    import json

    from viewer.config import Settings
    from viewer.ui.datasets_tab import DatasetHandlers

    raw = json.loads((HARBOR / "openhands__hello-world.traces.json").read_text())
    shutil.copy(HARBOR / "openhands__hello-world.traces.json", tmp_path / "harbor.json")
    h = DatasetHandlers(Settings(data_root=str(tmp_path)), store=None, browse=None)
    blank = ["", "", "", "", "", "row", False]  # agent, model, task, reward >=, reward <=, sort, descending

    held, status, table, page = h.on_open("harbor.json", "auto", "", "", *blank)
    assert "harbor" in status and page == 1 and list(table["row"]) == list(range(len(raw)))
    assert list(table["agent"]) == [r["agent"] for r in raw]
    _, _, again, page = h.on_next(held, 1, *blank)  # past the last page: the last page
    assert page == 1 and list(again["row"]) == list(range(len(raw)))
    model = raw[0]["model"]
    _, _, kept, _ = h.on_filter(held, "", model, "", "", "", "row", False)
    assert list(kept["row"]) == [i for i, r in enumerate(raw) if r["model"] == model]
    _, _, none, _ = h.on_filter(held, "nobody-" + raw[0]["agent"], "", "", "", "", "row", False)
    assert len(none) == 0

    skip = {"__type__": "update"}
    for answer, said in ((h.on_page(None, 1, *blank), "Open a dataset first."),
                         (h.on_open("  ", "auto", "", "", *blank), "Type a dataset"),
                         (h.on_open("/etc/passwd", "auto", "", "", *blank), "outside the allowed data folder")):
        assert answer[0] == skip and answer[2:] == [skip, skip] and said in answer[1], answer  # the rest unchanged
