"""The one seam to Gradio's internals (viewer/ui/seam.py, issue 37 part 1).

* No private Gradio name appears in ``viewer/`` outside the seam (an AST scan), and docs/GRADIO.md §7 lists
  every entry the seam declares.
* The seam is an optimisation, not a dependency: the app runs on Gradio's own behaviour with the seam off
  (the setting) and on another Gradio version (one log line); a module-scoped app with the seam off answers
  through the API and in a browser, so CI keeps proving it.
"""
from __future__ import annotations

import ast
import os
import dataclasses
import json
import logging
import re
from pathlib import Path

import pytest

from conftest import free_port
from tv_payload import expand

REPO = Path(__file__).resolve().parent.parent
SEAM = REPO / "viewer" / "ui" / "seam.py"

# Undocumented Gradio names without a leading underscore (modules, classes, attributes, session keys): each
# use of one is a use of Gradio's internals. The underscore names are found without a list (see _private).
INTERNAL = {"LocalContext", "Context", "root_block", "blocks_config", "state_holder", "StateHolder", "SessionState",
            "get_space", "config_values", "default_config", "session_data", "state_data", "postprocess_data",
            "preprocess_data", "MatplotlibBackendMananger", "ANAYLTICS_CACHE_FREQUENCY", "ANALYTICS_MAX_EVENTS",
            "oauth_info", "process_api", "fns"}
GETATTR = {"getattr", "hasattr", "setattr", "delattr"}
# gradio's own namespaces that its documentation uses as public (gr.themes.Soft, gr.components.Component)
PUBLIC_NAMESPACES = {"themes", "components"}
# Imported by name in gradio/__init__.py and documented (gradio.app/docs/gradio/api: an API / MCP endpoint with no
# component), yet left out of its hand-written __all__
DOCUMENTED_OUTSIDE_ALL = {"api"}


def _defined(trees: dict[Path, ast.AST]) -> set[str]:
    """Every name the viewer defines itself (functions, classes, attributes it assigns, parameters, slots):
    an underscore name outside this set is someone else's private name."""
    names: set[str] = set()
    for tree in trees.values():
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, ast.arg):
                names.add(n.arg)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                names.add(n.attr)
            elif isinstance(n, ast.alias):
                names.add((n.asname or n.name).split(".")[0])
            elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in n.targets):
                names |= {c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def _underscore(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private(name: str, ours: set[str]) -> bool:
    return _underscore(name) and name not in ours


def scan(trees: dict[Path, ast.AST]) -> list[str]:
    """Every use of a private Gradio name in ``trees`` (path -> module AST), as 'path:line: what'."""
    import gradio as gr

    public = set(gr.__all__) | PUBLIC_NAMESPACES | DOCUMENTED_OUTSIDE_ALL
    ours = _defined(trees)
    found = []
    for path, tree in trees.items():
        aliases = {"gr", "gradio"}
        for n in ast.walk(tree):
            what = None
            if isinstance(n, ast.Import):
                bad = [a.name for a in n.names if a.name.startswith("gradio.")
                       or any(_underscore(p) for p in a.name.split("."))]
                what = f"import {', '.join(bad)}" if bad else None
            elif isinstance(n, ast.ImportFrom) and n.module:
                mod = n.module
                if mod.startswith("gradio.") or any(_underscore(p) for p in mod.split(".")):
                    what = f"from {mod} import ..."
                elif mod == "gradio" and any(a.name not in public for a in n.names):
                    what = f"from gradio import {', '.join(a.name for a in n.names if a.name not in public)}"
            elif isinstance(n, ast.Attribute):
                if isinstance(n.value, ast.Name) and n.value.id in aliases and n.attr not in public:
                    what = f"{n.value.id}.{n.attr} (not in gradio.__all__)"
                elif n.attr in INTERNAL or _private(n.attr, ours):
                    what = f".{n.attr}"
            elif isinstance(n, ast.Name) and n.id in INTERNAL:
                what = n.id
            elif isinstance(n, ast.Constant) and n.value in INTERNAL:
                what = f"{n.value!r} (an internal name in a string: a session key, getattr)"
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in GETATTR and \
                    len(n.args) > 1 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str) \
                    and _private(n.args[1].value, ours):
                what = f"{n.func.id}(..., {n.args[1].value!r})"
            if what:
                found.append(f"{path.relative_to(REPO) if path.is_absolute() else path}:{n.lineno}: {what}")
    return found


def _viewer_trees() -> dict[Path, ast.AST]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted((REPO / "viewer").rglob("*.py"))}


def test_no_private_gradio_name_outside_the_seam():
    trees = _viewer_trees()
    seam_uses = scan({SEAM: trees[SEAM]})
    found = [f for f in scan(trees) if not f.startswith("viewer/ui/seam.py:")]
    assert found == [], "private Gradio names outside viewer/ui/seam.py:\n" + "\n".join(found)
    assert len(seam_uses) > 10  # the scan sees what the seam does (it is not blind to the forms it checks)


@pytest.mark.parametrize("code", [
    "from gradio.context import LocalContext",
    "import gradio.utils",
    "from gradio import state_holder",
    "import gradio as gr\nx = gr.utils.get_space()",
    "def f(demo):\n    return demo._queue",
    "def f(component):\n    return component._id",
    "def f(evt):\n    return getattr(evt, '_data', None)",
    "def f(session):\n    return session.get('oauth_info')",
    "def f(demo):\n    return demo.state_holder",
    "def f(ctx):\n    return ctx.root_block",
])
def test_the_scan_finds_each_form_of_a_private_name(code):
    assert scan({Path("x.py"): ast.parse(code)}), code


def test_the_scan_leaves_our_own_private_names_and_gradios_public_api():
    code = ("import gradio as gr\nclass A:\n    def __init__(self):\n        self._lock = 1\n"
            "    def f(self, other):\n        return other._lock, gr.Blocks, gr.themes.Soft, gr.components.Component")
    assert scan({Path("x.py"): ast.parse(code)}) == []


def _seam_section() -> str:
    text = (REPO / "docs" / "GRADIO.md").read_text()
    start = text.index("## 7. The seam")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_gradio_md_lists_every_seam_entry():
    from viewer.ui import seam

    listed = re.findall(r"^### `([a-z_]+)`", _seam_section(), re.M)
    assert sorted(listed) == sorted(seam.NAMES), "docs/GRADIO.md §7 and viewer/ui/seam.py ENTRIES differ"
    section = _seam_section()
    for name in seam.NAMES:  # each says what Gradio does, what we change, the figure, the upstream fix
        body = section.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        for part in ("Gradio:", "We:", "Figure:", "Upstream:"):
            assert f"**{part}**" in body, f"docs/GRADIO.md §7 `{name}` has no {part}"


def test_the_seam_is_written_for_the_pinned_gradio():
    import gradio as gr

    from viewer.ui import seam

    pins = {f: re.search(r"gradio(?:\[\w+\])?==([\d.]+)", (REPO / f).read_text()).group(1)
            for f in ("requirements.txt", "pyproject.toml")}
    space = re.search(r"^sdk_version: ([\d.]+)", (REPO / "README.md").read_text(), re.M).group(1)
    assert set(pins.values()) == {space} == {seam.WRITTEN_FOR} == {gr.__version__}, (pins, space, seam.WRITTEN_FOR)


# a run of the whole suite with the seam forced off (RI_TEST_SEAM=off, tests/conftest.py) cannot test the switch
FORCED_OFF = pytest.mark.skipif(os.environ.get("RI_TEST_SEAM") == "off", reason="RI_TEST_SEAM=off forces the seam off")


def _settings(**kw):
    from viewer.config import Settings

    return dataclasses.replace(Settings.from_env(), **kw)


@FORCED_OFF
def test_another_gradio_version_runs_on_gradios_own_behaviour_after_one_log_line(monkeypatch, caplog):
    import gradio as gr
    from gradio.state_holder import SessionState

    from viewer.ui import create_app, seam

    monkeypatch.setattr(gr, "__version__", "6.99.0")
    monkeypatch.setattr(seam, "_said", [])
    with caplog.at_level(logging.WARNING, logger=seam.__name__):
        demos = [create_app(_settings()) for _ in range(2)]
    said = [r.getMessage() for r in caplog.records if r.name == seam.__name__]
    assert len(said) == 1 and "6.99.0" in said[0] and seam.WRITTEN_FOR in said[0], said
    for demo in demos:
        assert not any(seam.is_on(demo, name) for name in seam.NAMES)
        assert type(SessionState(demo).config_values) is dict  # Gradio's own, made eagerly


@FORCED_OFF
def test_the_setting_switches_every_entry_off_for_its_app():
    from gradio.state_holder import SessionState

    from viewer.config import Settings
    from viewer.ui import create_app, seam

    assert Settings.from_env({"VIEWER_GRADIO_SEAM": "0"}).gradio_seam is False and Settings().gradio_seam is True
    on, off = create_app(_settings()), create_app(_settings(gradio_seam=False))
    assert all(seam.is_on(on, name) for name in seam.NAMES)
    assert not any(seam.is_on(off, name) for name in seam.NAMES)
    assert type(SessionState(off).config_values) is dict and type(SessionState(on).config_values) is not dict


# ---------------------------------------------------------------------------------- the app with the seam off
@pytest.fixture(scope="module")
def off_app(tmp_path_factory):
    """The real app on loopback with the seam off (VIEWER_GRADIO_SEAM=0), launched as app.py launches it."""
    import os

    from viewer.ui import create_app, launch_kwargs, seam

    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    settings = _settings(gradio_seam=False)
    demo = create_app(settings)
    assert not any(seam.is_on(demo, name) for name in seam.NAMES)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield demo, url.rstrip("/")
    demo.close()


def test_with_the_seam_off_the_api_opens_and_walks_the_turns(off_app):
    from gradio_client import Client

    demo, url = off_app
    client = Client(url + "/", verbose=False)
    # the capture's agent calls, as recorded: the app's turns 1-3 (turn 0 is the bookkeeping title call)
    calls = json.loads((REPO / "sample_data" / "qwen3-tiny" / "turns.json").read_text())
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    for index, call in zip((1, 2, 3), calls):
        turn, payload, _, _ = client.predict(index, api_name="/select_turn")
        view = expand(payload)
        assert turn == index and view["turn"] == index
        assert view["ids"] == call["prompt_ids"] + call["output_ids"]
    # Gradio's own per-session copies, made eagerly (no seam entry touched this session)
    session = next(iter(demo.state_holder.session_data.values()))
    assert type(session.config_values) is dict


def test_with_the_seam_off_a_visitors_is_choice_still_follows_their_turn_switches(monkeypatch):
    """The visitor's IS choice reaches a turn switch as an input (Gradio's public route), not through the
    seam: with the seam off a turn switch still marks the tokens with the visitor's own choice."""
    import aio
    from gradio.state_holder import SessionState

    from test_attacks_sessions import _result
    from viewer.config import SAMPLE_DIR
    from viewer.ui import create_app, rescores
    from viewer.ui.store import RolloutStore

    settings = _settings(gradio_seam=False, plot_defer_s=0.0)
    demo = create_app(settings)
    fns = {f.api_name: f for f in demo.fns.values()}
    key = RolloutStore(settings).open(SAMPLE_DIR / "qwen3-tiny").key
    rescores.put(key, _result(), "someone")
    try:
        mine, other = SessionState(demo), SessionState(demo)

        def call(state, name, *values):
            fn = fns[name]
            data = list(values) + [None] * (len(fn.inputs) - len(values))
            return aio.run(demo.process_api(fn, data, state=state, root_path="http://127.0.0.1"))["data"]

        def marks(state):
            call(state, "select_turn", None, 0)
            return expand(call(state, "select_turn", None, 1)[2]).get("delta", {}).get("is")

        for st in (mine, other):
            call(st, "open_sample", "qwen3-tiny", "")
        call(mine, "rescore_is_mode", None, 1, "token_mask", "0.25", "3")
        seen = marks(mine)
        assert (seen["mode"], seen["min"], seen["max"]) == ("token_mask", 0.25, 3.0)
        theirs = marks(other)
        assert theirs is None or theirs["mode"] != "token_mask"
    finally:
        rescores.forget(key)


@pytest.mark.browser
def test_with_the_seam_off_the_page_paints_hovers_and_steps(off_app, page):
    _, url = off_app
    page.goto(f"{url}/?source=sample:qwen3-tiny&turn=1")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    tok = page.locator("#token-view .tk.k1").nth(2)
    tok.scroll_into_view_if_needed()
    tok.hover()
    page.locator("#token-view .ri-tip").wait_for(state="visible")
    assert "logprob " in page.locator("#token-view .ri-tip").text_content()
    page.locator("#next-turn").click()
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.turn === '2'", timeout=60000)
