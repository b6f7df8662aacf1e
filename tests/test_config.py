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
