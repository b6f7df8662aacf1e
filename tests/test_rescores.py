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


def test_same_run_only_for_a_finished_rescore_of_exactly_that_request():
    from types import SimpleNamespace

    done, cut = SimpleNamespace(cancelled=False), SimpleNamespace(cancelled=True)
    asked = ("tiny-qwen3", "trl-message", "cpu", "float32", 0.5)
    rescores.put("k-same", done, "session-a", asked)
    assert rescores.same_run("k-same", asked) is done
    assert rescores.same_run("k-same", ("smollm2",) + asked[1:]) is None  # another model
    assert rescores.same_run("k-same", asked[:1] + ("trl-contract",) + asked[2:]) is None  # another trainer
    assert rescores.same_run("k-other", asked) is None and rescores.same_run(None, asked) is None
    rescores.put("k-same", cut, "session-a", asked)  # a cancelled run holds part of the rows: run again
    assert rescores.same_run("k-same", asked) is None
    rescores.put("k-same", done, "session-a")  # put without a request (a library caller): never reused
    assert rescores.same_run("k-same", asked) is None
