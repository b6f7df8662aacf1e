"""viewer/ui/rescores.py: the shared latest rescore per rollout, and who ran it."""
from viewer.ui import rescores


def test_a_visitors_is_choice_is_theirs_and_never_changes_the_shared_result():
    """Issue 36: the IS mode and bounds were stored with the shared result (``restyle``), so one visitor's
    choice changed everyone's marks. Now a view applies the visitor's choice to a copy; the shared result,
    its stamp and who ran it stay as they were."""
    from viewer.rescore.values import RescoreResult

    res = RescoreResult(model="m", device="cpu", dtype="float32", temperature=1.0, threshold=0.2, trainer={},
                        turns=[])
    rescores.put("k-view", res, "session-a")
    ran_by, when = rescores.origin("k-view")
    before = rescores.stamp("k-view")
    mine = rescores.seen("k-view", ("token_mask", 0.5, 2.0))
    assert mine.is_choice == ("token_mask", 0.5, 2.0) and mine.turns is res.turns  # a view, not a copy of the numbers
    assert rescores.get("k-view") is res and res.is_choice is None  # the shared result is untouched
    assert rescores.stamp("k-view") == before and rescores.origin("k-view") == ("session-a", when)
    assert rescores.seen("k-never-rescored", ("token_mask", 0.5, 2.0)) is None
    # what a session's State holds, read strictly: the panel's first values when it holds nothing usable
    assert rescores.choice_of(None) == rescores.DEFAULT_CHOICE
    assert rescores.choice_of(rescores.view_value(None)) is None
    assert rescores.choice_of(rescores.view_value(("token_mask", 0.5, 2.0))) == ("token_mask", 0.5, 2.0)
    assert rescores.choice_of({"is": ("rm -rf", 0.5, 2.0)}) == rescores.DEFAULT_CHOICE
    with rescores.choosing(None):
        assert rescores.choice_now(rescores.view_value(("token_mask", 0.5, 2.0))) is None
    assert rescores.choice_now(None) == rescores.DEFAULT_CHOICE


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
