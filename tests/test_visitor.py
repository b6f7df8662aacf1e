"""viewer/visitor.py: every capture field and deep-link parameter typed and checked once, and the
entry points (Capture tab, capture CLI, deep links) going through it. Expected values are worked
out by hand from the field's meaning (a Hub repo id is OWNER/NAME, a listed model is in
docs/CAPTURE-GUIDE.md's CPU model list), not from the validator."""
from __future__ import annotations

from pathlib import Path

import pytest

from viewer.config import Settings
from viewer.capture.fields import capture_spec
from viewer.visitor import VisitorError, deep_link, source

SECRET_DIR = "/etc"


def _hf(**kw):
    d = dict(backend="hf-jobs", results_repo="alice/captures")
    d.update(kw)
    return d


@pytest.mark.parametrize("field,value", [
    ("backend", "sh -c id"), ("backend", "LOCAL"),
    ("model", "/proc/self/environ"), ("model", "../../etc/passwd"), ("model", "a/b/c"), ("model", "http://x/y"),
    ("model", "owner/na--me"), ("model", "x" * 600), ("model", SECRET_DIR),
    ("results_repo", "/etc/passwd"), ("results_repo", "a/../b"), ("results_repo", "noowner"),
    ("results_repo", "a/b; rm -rf /"), ("results_repo", ""),
    ("tokenizer", "/etc"), ("tokenizer", "../x"), ("tokenizer", "/proc/self/environ"),
    ("instruction", "x" * 20_001), ("instruction", "a\x00b"), ("instruction", "bell\x07"),
    ("task_index", -1), ("task_index", 10_000), ("task_index", "1e9"), ("task_index", "nan"), ("task_index", 1.5),
    ("task_index", True), ("agent_timeout_s", 1e12), ("agent_timeout_s", "inf"), ("agent_timeout_s", 0),
    ("max_output_tokens", 0), ("max_output_tokens", 10**9), ("top_logprobs", 99), ("steps", -3),
    ("logprobs_mode", "--model=/etc"), ("flavor", "../../x"), ("flavor", "a100 large"),
    ("script_commands", ["cat /etc/passwd"]),
])
def test_public_capture_fields_are_refused_with_the_field_named(field, value):
    with pytest.raises(VisitorError) as e:
        capture_spec(Settings(), out="o", public=True, token="t", **_hf(**{field: value}))
    assert e.value.field == field and str(e.value).startswith(field + ":")


def test_public_endpoint_values():
    for bad in ("file:///etc/passwd", "gopher://x", "http://user:pw@host.example", "http://", "http://h:99999"):
        with pytest.raises(VisitorError) as e:
            capture_spec(Settings(), out="o", public=True, backend="endpoint", endpoint=bad)
        assert e.value.field == "endpoint"
    s = capture_spec(Settings(), out="o", public=True, backend="endpoint", endpoint="https://gpu.example:8000",
                     model="Qwen/Qwen3-8B")
    assert s.endpoint == "https://gpu.example:8000" and s.public_app and s.require_sandbox


def test_good_public_hf_jobs_spec_is_typed():
    s = capture_spec(Settings(), out="o", public=True, token="hf_oauth", backend="hf-jobs",
                     model="Qwen/Qwen3-4B-Instruct-2507", results_repo="alice/captures", task_index="2",
                     agent_timeout_s="120", max_output_tokens=512.0, instruction="  write solution.py  ")
    assert (s.model, s.results_repo, s.task_index, s.agent_timeout_s, s.max_output_tokens) == \
        ("Qwen/Qwen3-4B-Instruct-2507", "alice/captures", 2, 120.0, 512)
    assert s.instruction == "write solution.py" and s.token == "hf_oauth" and s.sandbox and s.public_app
    assert type(s.task_index) is int and type(s.max_output_tokens) is int
    for name in ("tiny-qwen3", "smollm2"):  # the CPU models of docs/CAPTURE-GUIDE.md
        assert capture_spec(Settings(), out="o", public=True, **_hf(model=name)).model == name


def test_local_mode_keeps_folders_loopback_and_the_cli_defaults(tmp_path):
    """Nothing a local user relies on is lost: model/tokenizer folders, a loopback endpoint."""
    model = tmp_path / "my-model"
    model.mkdir()
    s = capture_spec(Settings(), out="o", public=False, backend="local", model=str(model), tokenizer=str(model),
                     script_commands=["echo hi"], sandbox=False)
    assert s.model == str(model.resolve()) and s.tokenizer == str(model.resolve()) and not s.sandbox
    assert s.script_commands == ["echo hi"] and not s.public_app and not s.require_sandbox
    assert capture_spec(Settings(), out="o", public=False, model="gpt2").model == "gpt2"  # an owner-less Hub name
    with pytest.raises(VisitorError):
        capture_spec(Settings(), out="o", public=True, backend="local", model="gpt2")
    e = capture_spec(Settings(), out="o", public=False, backend="endpoint", endpoint="http://127.0.0.1:8000")
    assert e.endpoint == "http://127.0.0.1:8000"
    with pytest.raises(VisitorError):  # a folder is not a model on a public app
        capture_spec(Settings(), out="o", public=True, backend="local", model=str(model))
    with pytest.raises(VisitorError):  # nor on a job machine, for hf-jobs
        capture_spec(Settings(), out="o", public=False, **_hf(model=str(model)))
    d = capture_spec(Settings(capture_model="smollm2", capture_agent_timeout_s=77.0), out="o", public=False)
    assert (d.backend, d.model, d.agent_timeout_s, d.task_index) == ("local", "smollm2", 77.0, 0)


def test_scripted_with_an_instruction_is_refused():
    with pytest.raises(VisitorError, match="scripted mode replays"):
        capture_spec(Settings(), out="o", public=False, scripted=True, instruction="do it")


def test_deep_link_is_typed_and_says_what_it_ignored():
    link = deep_link({"source": "sample:qwen3-tiny", "turn": "3", "row": "x", "tok": "9-4", "mode": "<script>",
                      "job": "../../etc", "present": "1", "compare": "a" * 5000, "compare_row": "2"})
    assert (link.source, link.turn, link.row, link.tok, link.mode, link.job, link.present, link.compare,
            link.compare_row) == ("sample:qwen3-tiny", 3, None, (4, 9), "mask", None, True, "", 2)
    assert "row='x'" in link.notice and "mode=" in link.notice and "job=" in link.notice and "compare=" in link.notice
    ok = deep_link({"job": "0123456789abcdef0123456789abcdef", "turn": "99999999999"})
    assert ok.job == "0123456789abcdef0123456789abcdef" and ok.turn is None and "turn=" in ok.notice
    assert deep_link({}).notice == "" and deep_link({}).mode == "mask"


def test_sources_route_through_the_existing_checks(tmp_path):
    settings = Settings(data_root=str(tmp_path))
    (tmp_path / "run.jsonl").write_text("{}\n")
    assert source("run.jsonl", settings).path == (tmp_path / "run.jsonl").resolve()
    for bad, want in (("../../etc/passwd", "outside"), ("/proc/self/environ", "outside"),
                      ("hf://nothing", "not a Hub dataset address"), ("sample:nope", "no bundled sample"),
                      ("", "name a rollout"), ("x" * 5000, "too long")):
        with pytest.raises(ValueError, match=want):
            source(bad, settings, ["qwen3-tiny"])
    assert source("hf://datasets/a/b/x.jsonl", settings).kind == "hub"


def test_capture_folders_are_new_and_unique(tmp_path):
    from viewer.capture.spec import new_capture_dir

    made = {new_capture_dir(tmp_path) for _ in range(50)}
    assert len(made) == 50 and all(p.is_dir() and not any(p.iterdir()) for p in made)
    assert all(Path(p).name.startswith("capture-") for p in made)


def test_the_ui_checks_typed_sources_only_through_visitor():
    """One validation point: no UI module resolves a typed path or parses an hf:// address itself
    (the Path box, the tokenizer folder, the scan folder and the Datasets tab once did)."""
    import re
    from pathlib import Path

    ui = Path(__file__).resolve().parent.parent / "viewer" / "ui"
    direct = [f"{p.name}: {m}" for p in sorted(ui.rglob("*.py"))
              for m in re.findall(r"\b(resolve_user_path|parse_hf)\(", p.read_text())]
    assert direct == []


def test_a_typed_path_is_bounded_text_before_it_is_resolved(tmp_path):
    from viewer.config import Settings
    from viewer.visitor import VisitorError, local_path

    s = Settings(data_root=str(tmp_path))
    (tmp_path / "a").mkdir()
    assert local_path("a", s) == (tmp_path / "a").resolve()
    with pytest.raises(VisitorError, match="too long"):
        local_path("a" * 5000, s)
    with pytest.raises(VisitorError, match="control characters"):
        local_path("a\x1b[2J", s)
    with pytest.raises(ValueError, match="outside the allowed data folder"):
        local_path("/etc", s)


def test_the_start_source_is_a_bundled_sample_by_where_it_is_not_by_its_folders_name(tmp_path):
    """The page's default source: ``sample:NAME`` for a folder of the bundled samples (found by path), the
    path itself for anything else, a user's own folder called ``sample_data`` included (it was taken for the
    bundled sample of the same name: issue 37, the app from the package)."""
    from viewer.config import SAMPLE_DIR
    from viewer.visitor import start_source

    bundled = sorted(p for p in SAMPLE_DIR.iterdir() if p.is_dir())[0]
    assert start_source(str(bundled)) == "sample:" + bundled.name
    own = tmp_path / "sample_data" / bundled.name
    own.mkdir(parents=True)
    assert start_source(str(own)) == str(own)
    assert start_source(str(tmp_path / "elsewhere")) == str(tmp_path / "elsewhere")
