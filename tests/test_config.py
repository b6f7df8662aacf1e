"""Every setting is documented (docs/SETTINGS.md, linked from the README), and env overrides work."""
import re
from pathlib import Path

import pytest

from viewer.config import Settings

REPO = Path(__file__).resolve().parent.parent
SETTINGS_MD = (REPO / "docs" / "SETTINGS.md").read_text()
TABLE = SETTINGS_MD[:SETTINGS_MD.index("## Resource budgets")]  # the settings table, before the budgets'


def _shown(default) -> str:
    """A default as the table writes it: paths inside the repository relative to it, empty as (none)."""
    if isinstance(default, str) and default.startswith(f"{REPO}/"):
        return str(Path(default).relative_to(REPO))
    return "(none)" if default == "" else str(default)


@pytest.mark.parametrize("name,env,default,help", Settings.docs())
def test_every_setting_is_in_the_settings_page(name, env, default, help):
    """docs/SETTINGS.md's table (linked from the README) has one row per setting, with its default."""
    rows = re.findall(rf"^\| `{env}` \| ([^|]*) \|", TABLE, re.M)
    assert len(rows) == 1, f"{env} ({name}) is not documented once in docs/SETTINGS.md's table"
    cell = rows[0].strip().strip("`").rstrip("/")
    shown_help = re.search(rf"^\| `{env}` \| [^|]* \| (.*) \|$", TABLE, re.M).group(1).replace("`", "")
    assert shown_help == help, f"{env}: the table's text differs from Settings' help (viewer/config.py)"
    assert cell in (_shown(default), "" if default == "" else None), f"{env}: table says {rows[0]!r}, default {default!r}"


def test_the_settings_table_names_only_real_settings():
    envs = {env for _, env, _, _ in Settings.docs()}
    listed = set(re.findall(r"^\| `([A-Z_]+)` \|", TABLE, re.M))
    assert listed and sorted(listed - envs) == []


def test_env_overrides_types():
    s = Settings.from_env({"VIEWER_MAX_UPLOAD_MB": "7", "VIEWER_LOW_LOGPROB": "-1.5", "VIEWER_TOKENIZER": "qwen3"})
    assert s.max_upload_mb == 7 and s.low_logprob == -1.5 and s.tokenizer == "qwen3"
    assert Settings.from_env({}).max_upload_mb == Settings().max_upload_mb


@pytest.mark.parametrize("raw, want", [("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("on", True),
                                       ("0", False), ("false", False), ("No", False), ("off", False)])
def test_yes_no_settings_accept_the_usual_spellings(raw, want):
    assert Settings.from_env({"VIEWER_PUBLIC": raw}).public is want
    assert Settings.from_env({"CAPTURE_AUTO_SETUP": raw}).capture_auto_setup is want


def test_a_bad_yes_no_value_is_refused_by_name():
    """bool("0") is True and a typo once meant "off" silently (VIEWER_PUBLIC=ture left public mode off)."""
    from viewer.config import env_flag

    assert Settings.from_env({"VIEWER_PUBLIC": ""}).public is False  # empty = unset = the default
    assert Settings.from_env({"CAPTURE_AUTO_SETUP": ""}).capture_auto_setup is True
    with pytest.raises(ValueError, match=r"VIEWER_PUBLIC='ture': not a yes/no value \(1, true, yes, on / 0, false"):
        Settings.from_env({"VIEWER_PUBLIC": "ture"})
    with pytest.raises(ValueError, match="VIEWER_MAX_UPLOAD_MB='lots': not a whole number"):
        Settings.from_env({"VIEWER_MAX_UPLOAD_MB": "lots"})
    assert env_flag("X", None, True) is True and env_flag("X", "  ", False) is False
    with pytest.raises(ValueError, match="X='2'"):
        env_flag("X", "2")


def test_the_hub_reads_offline_mode_with_the_one_parser(monkeypatch):
    from viewer.sources import hub

    for raw, want in (("1", True), ("ON", True), ("0", False), ("", False)):
        monkeypatch.setenv("HF_HUB_OFFLINE", raw)
        assert hub._offline() is want
    monkeypatch.setenv("HF_HUB_OFFLINE", "maybe")
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE='maybe'"):
        hub._offline()


def test_no_module_parses_a_yes_no_variable_itself():
    """The spellings are written once (viewer/config.py: TRUE_WORDS / FALSE_WORDS); a second copy
    (sources/hub.py, budgets.py had one) drifts from it."""
    import ast

    offenders = []
    for p in sorted((REPO / "viewer").rglob("*.py")):
        if p.name == "config.py" and p.parent.name == "viewer":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Tuple) and {"1", "true"} <= {getattr(e, "value", None) for e in n.elts}:
                offenders.append(f"{p.relative_to(REPO)}:{n.lineno}")
    assert offenders == []
