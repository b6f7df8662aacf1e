"""viewer/ui/rescores.py: the shared latest rescore per rollout, and who ran it."""
from viewer.ui import rescores


def test_changing_the_is_choice_keeps_who_ran_the_rescore_and_rebuilds_views():
    # a visitor's IS mode change re-keys the views but must not make the runner's own result "cached"
    rescores.put("k-restyle", "first", "session-a")
    ran_by, when = rescores.origin("k-restyle")
    before = rescores.stamp("k-restyle")
    rescores.restyle("k-restyle", "first, token_mask")
    assert rescores.get("k-restyle") == "first, token_mask"
    assert rescores.origin("k-restyle") == ("session-a", when) and ran_by == "session-a"
    assert rescores.stamp("k-restyle") > before
    rescores.restyle("k-never-rescored", "x")  # nothing to restyle: nothing kept
    assert rescores.get("k-never-rescored") is None
