"""Every setting is documented, and env overrides work."""
from pathlib import Path

import pytest

from viewer.config import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("name,env,default,help", Settings.docs())
def test_every_setting_is_in_readme(name, env, default, help):
    assert f"`{env}`" in README, f"{env} ({name}) is not documented in README.md"


def test_env_overrides_types():
    s = Settings.from_env({"VIEWER_MAX_UPLOAD_MB": "7", "VIEWER_LOW_LOGPROB": "-1.5", "VIEWER_TOKENIZER": "qwen3"})
    assert s.max_upload_mb == 7 and s.low_logprob == -1.5 and s.tokenizer == "qwen3"
    assert Settings.from_env({}).max_upload_mb == Settings().max_upload_mb
