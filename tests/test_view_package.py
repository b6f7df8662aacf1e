"""An app from the package (issue 37, part 4): ``rollout-inspector view`` from a wheel installed in a fresh venv
outside the repository serves the bundled samples (package data) and a folder; it writes nothing under
site-packages, and Ctrl-C leaves no process behind. Plus the fast facts it rests on: exact pins that agree
everywhere, every package folder shipped, and per-user folders when installed (repository paths when not)."""
from __future__ import annotations

import html
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import tomllib
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from viewer.cli import main
from viewer.cli.view import view_target
from viewer.config import CACHE_DIR, IN_CHECKOUT, SAMPLE_DIR, Settings, user_dir

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


# --- pins --------------------------------------------------------------------------------------------------

def _lines(name: str) -> list[str]:
    return [ln.strip() for ln in (REPO / name).read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith(("#", "-r"))]


def test_every_runtime_dependency_is_pinned_exactly_and_everywhere_the_same():
    """pyproject.toml declares what requirements.txt installs on the Space, each ``==`` one version (as gradio
    is, identically to the README's ``sdk_version``), the extras as their requirements files, and the versions
    pinned are the ones this environment runs (scripts/setup.sh installs the files)."""
    declared = PYPROJECT["project"]["dependencies"]
    assert sorted(declared) == sorted(_lines("requirements.txt"))
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["rescore"] == _lines("requirements-rescore.txt") and extras["scale"] == _lines("requirements-scale.txt")
    sdk = re.search(r"^sdk_version: (\S+)$", (REPO / "README.md").read_text(), re.M).group(1)
    for text in declared + extras["rescore"] + extras["scale"]:
        req = Requirement(text)
        (spec,) = req.specifier  # one specifier ...
        assert spec.operator == "==" and "*" not in spec.version, f"{text}: not pinned to one version"  # ... exact
        if req.name == "gradio":
            assert spec.version == sdk, "gradio's pin differs from the Space's sdk_version (README.md)"
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            assert text not in declared, f"{req.name}: a runtime dependency that is not installed"
            continue  # an extra the app-only set-up leaves out
        assert spec.contains(installed, prereleases=True), f"{text}: this environment runs {installed}"


# --- what the wheel holds ----------------------------------------------------------------------------------

def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject.toml lists the packages (sample_data/ is mapped into one); a folder of viewer/ that holds files
    and is not listed would be missing from the wheel."""
    tool = PYPROJECT["tool"]["setuptools"]
    folders = {".".join(d.relative_to(REPO).parts) for d in (REPO / "viewer").rglob("*")
               if d.is_dir() and d.name != "__pycache__" and any(f.is_file() for f in d.iterdir())}
    assert sorted(set(tool["packages"]) - {"viewer.sample_data"}) == sorted(folders | {"viewer"})
    assert tool["package-dir"] == {"viewer.sample_data": "sample_data"}
    assert tool["package-data"]["viewer.sample_data"] == ["**/*"]


# --- where the app reads and writes ------------------------------------------------------------------------

def test_from_the_repository_every_path_stays_in_the_repository():
    assert IN_CHECKOUT and SAMPLE_DIR == REPO / "sample_data" and CACHE_DIR == REPO / ".cache"
    default = Settings()
    assert (default.capture_out_root, default.data_root) == (str(REPO / "out" / "captures"), str(REPO / "sample_data"))


def test_user_folders_follow_xdg(tmp_path):
    assert user_dir("data", {"XDG_DATA_HOME": str(tmp_path / "d")}) == tmp_path / "d" / "rollout-inspector"
    assert user_dir("cache", {"XDG_CACHE_HOME": str(tmp_path / "c")}) == tmp_path / "c" / "rollout-inspector"
    # unset, empty or relative (the spec says to ignore a relative one): the home folder's defaults
    assert user_dir("data", {}) == Path.home() / ".local" / "share" / "rollout-inspector"
    assert user_dir("cache", {"XDG_CACHE_HOME": "rel/cache"}) == Path.home() / ".cache" / "rollout-inspector"


def _installed_copy(site: Path) -> Path:
    """viewer/ and the samples laid out as the wheel installs them (no pyproject.toml beside the package)."""
    shutil.copytree(REPO / "viewer", site / "viewer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "sample_data", site / "viewer" / "sample_data")
    return site


def test_installed_the_samples_are_package_data_and_writes_go_to_user_folders(tmp_path):
    site = _installed_copy(tmp_path / "site")
    code = ("import json, viewer.config as c\n"
            "s = c.Settings()\n"
            "print(json.dumps([c.IN_CHECKOUT, str(c.SAMPLE_DIR), s.data_root, s.sample, s.capture_out_root,"
            " str(c.CACHE_DIR)]))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CAPTURE_OUT_ROOT")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xc"))
    env.pop("XDG_DATA_HOME", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         check=True, timeout=120).stdout
    in_checkout, samples, root, sample, captures, cache = json.loads(out)
    assert in_checkout is False and samples == root == str(site / "viewer" / "sample_data")
    assert sample == str(site / "viewer" / "sample_data" / "smollm2")
    assert captures == str(tmp_path / "home" / ".local" / "share" / "rollout-inspector" / "captures")
    assert cache == str(tmp_path / "xc" / "rollout-inspector")


# --- view SOURCE_OR_FOLDER: what opens, and the data root ----------------------------------------------------

def _captures(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", runs / "b-run")
    shutil.copytree(SAMPLE_DIR / "smollm2", runs / "a-run")
    (runs / "notes").mkdir()
    return runs


def test_view_target_names_the_data_root_and_what_opens(tmp_path, monkeypatch):
    runs = _captures(tmp_path)
    assert view_target(str(runs)) == (runs, runs / "a-run")  # a folder of captures: its first, by name
    assert view_target(str(runs / "b-run")) == (runs / "b-run", runs / "b-run")  # a capture: itself
    trace = runs / "b-run" / "trace.json"
    assert view_target(str(trace)) == (runs / "b-run", trace)  # a file: its own folder is the root
    assert view_target(str(runs / "notes")) == (runs / "notes", Path(Settings().sample))  # nothing: the sample
    monkeypatch.chdir(runs)
    assert view_target("b-run") == (runs / "b-run", runs / "b-run")  # relative to where the command runs


def test_what_view_opens_on_start_passes_the_visitors_check_of_its_data_root(tmp_path):
    """The app opens the start source through the one check every visitor's source goes through (inside the
    data root): a capture that is its own data root, or a file in its folder, is not refused."""
    from viewer.visitor import source

    runs = _captures(tmp_path)
    for target in (runs, runs / "b-run", runs / "b-run" / "turns.json"):
        root, start = view_target(str(target))
        assert source(str(start), Settings(data_root=str(root), sample=str(start))).path == start


def test_view_of_a_missing_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {tmp_path / 'missing'}: no such file or folder\n"


@pytest.mark.slow  # a fresh process builds the app
def test_a_taken_port_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "viewer", "view", "--port", str(port)], capture_output=True,
                           text=True, cwd=REPO, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert (r.returncode, r.stdout) == (2, ""), r.stderr[-2000:]
    assert r.stderr.startswith(f"error: 127.0.0.1: cannot listen on port {port} (") and r.stderr.count("\n") == 1
    assert r.stderr.endswith("choose another with --port / --host\n") and "launch()" not in r.stderr, r.stderr


# --- the wheel, in a fresh venv in an empty folder (slow) --------------------------------------------------

def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its mtime and size: a folder's mtime moves when an entry is made in it."""
    return {str(p.relative_to(root)): (p.lstat().st_mtime_ns, p.lstat().st_size) for p in root.rglob("*")}


def _clean_clone(dest: Path) -> Path:
    """The files a clone of this working tree has: tracked and new ones, none that git ignores (build/, a stale
    egg-info, caches). On CI, a clean clone already."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is not in the clone either
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


class _App:
    """``rollout-inspector view ...`` in its own process group, its stdout read line by line."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = 180.0) -> str:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s; so far: {self.seen}") from None
        assert got is not None, f"the app ended (exit {self.proc.wait()}): {self.seen} {self.proc.stderr.read()[-3000:]}"
        self.seen.append(got)
        return got

    def ctrl_c(self) -> tuple[int, list[str], str]:
        """Ctrl-C as a terminal sends it (SIGINT to the process group); (exit code, the rest of stdout, stderr)."""
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=60)
        rest = []
        while (line := self.lines.get(timeout=10)) is not None:
            rest.append(line)
        return code, rest, self.proc.stderr.read()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _open(url: str, api: str, value: str) -> dict:
    """One of the app's public open_* events through gradio_client, as a script would call it."""
    from gradio_client import Client

    out = Client(url, verbose=False).predict(value, "", api_name=api)
    return {"header": html.unescape(out[0] if isinstance(out[0], str) else json.dumps(out[0])),
            "status": html.unescape(str(out[1]))}


@pytest.mark.slow  # builds a wheel, makes a venv, starts the app twice (about a minute)
def test_wheel_in_a_fresh_venv_serves_the_samples_and_a_folder_and_writes_nothing_in_site_packages(tmp_path):
    src = _clean_clone(tmp_path / "clone")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True, cwd=tmp_path, timeout=600)
    (whl,) = (tmp_path / "dist").glob("rollout_inspector-*.whl")
    import zipfile

    names = set(zipfile.ZipFile(whl).namelist())
    samples = sorted(p.relative_to(REPO / "sample_data").as_posix() for p in (REPO / "sample_data").rglob("*")
                     if p.is_file())
    assert [s for s in samples if f"viewer/sample_data/{s}" not in names] == [], "samples missing from the wheel"

    # A fresh venv; the dependencies are the ones this environment has (offline: nothing is downloaded), seen
    # through a .pth line, and pip resolves the wheel's exact pins against them. No index, no machine config.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    deps = sysconfig.get_paths()["purelib"]
    (site / "_ri_test_deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    empty = tmp_path / "empty"
    home = tmp_path / "home"
    empty.mkdir()
    home.mkdir()
    keep = {"PATH", "LANG", "LC_ALL", "TMPDIR", "CI"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", GRADIO_TEMP_DIR=str(tmp_path / "gradio"),
               NO_PROXY="127.0.0.1,localhost")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", str(whl)], check=True, capture_output=True,
                   env=env, cwd=empty, timeout=600)
    where = subprocess.run([str(py), "-c", "import viewer.config as c; print(c.__file__, c.IN_CHECKOUT)"],
                           capture_output=True, text=True, env=env, cwd=empty, check=True).stdout.split()
    assert Path(where[0]).is_relative_to(site) and where[1] == "False", where  # the wheel's copy, not the repo
    before = _tree(venv)

    exe = str(venv / "bin" / "rollout-inspector")
    # 1. as typed: the bundled sample
    app = _App([exe, "view"], env, empty)
    try:
        first = app.line()
        url = re.fullmatch(r"Rollout Inspector: (http://127\.0\.0\.1:\d+/)  \(Ctrl-C stops it\)", first).group(1)
        details = [app.line() for _ in range(3)]
        assert details[0] == "  opened on start: sample:smollm2"
        assert details[2] == f"  captures are written to: {home}/.local/share/rollout-inspector/captures"
        page = httpx.get(url, timeout=60, trust_env=False)
        assert page.status_code == 200 and "Rollout Inspector" in page.text
        for name in ("qwen3-tiny", "smollm2"):
            meta = json.loads((REPO / "sample_data" / name / "summary.json").read_text())
            turns = json.loads((REPO / "sample_data" / name / "turns.json").read_text())
            got = _open(url, "/open_sample", name)
            # read from the package's own data, inside the venv (a local app names the path it read)
            assert str(site / "viewer" / "sample_data" / name) in got["header"], got
            assert meta["model"] in got["header"], got
            assert f"{len(turns)} (" in got["header"], got  # "turns: N (k trained)"
        code, rest, err = app.ctrl_c()
        assert code == 0 and rest[-1] == "Rollout Inspector stopped.", (code, rest, err[-2000:])
        assert "Traceback" not in err, err[-3000:]
        assert _group_gone(app.proc.pid), "a process of the app outlived Ctrl-C"
    finally:
        app.kill()

    # 2. a folder (and `python -m viewer`, the other way in): its first capture opens, and it is the data root
    folder = tmp_path / "mine"
    shutil.copytree(REPO / "sample_data" / "qwen3-tiny", folder / "my-run")
    app = _App([str(py), "-m", "viewer", "view", str(folder), "--json"], env, empty)
    try:
        doc = json.loads(app.line())
        cli_md = (REPO / "docs" / "CLI.md").read_text().split("### `view --json`", 1)[1]
        assert list(doc) == re.findall(r"`([a-z_]+)`", re.search(r"^Top-level keys: (.*)\.$", cli_md, re.M).group(1))
        assert (doc["source"], doc["data_root"], doc["public"]) == (str(folder / "my-run"), str(folder), False)
        assert doc["captures"] == str(folder / "captures")  # beside the user's data (issue 41, point 12)
        meta = json.loads((folder / "my-run" / "summary.json").read_text())
        got = _open(doc["url"], "/open_path", "my-run")  # a path typed relative to the data root
        assert "my-run" in got["header"] and meta["model"] in got["header"], got
        refused = _open(doc["url"], "/open_path", str(REPO / "sample_data" / "smollm2"))
        assert f"outside the allowed data folder {folder}" in refused["status"], refused
        code, rest, err = app.ctrl_c()
        assert (code, rest) == (0, []), (code, rest, err[-2000:])  # --json: one document, nothing after it
        assert _group_gone(app.proc.pid)
    finally:
        app.kill()

    after = _tree(venv)
    assert {k: v for k, v in after.items() if before.get(k) != v} == {} and set(before) == set(after), \
        "the app wrote inside its venv (site-packages)"
    assert list(empty.iterdir()) == [], "the app wrote into the folder it was started from"
