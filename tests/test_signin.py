"""viewer/ui/signin.py: Hub reads take the visitor's token from Gradio's signed session only."""
from __future__ import annotations

import time
from types import SimpleNamespace

from viewer.ui.signin import hub_token


def _request(session=None):
    scope = {"type": "http"} if session is None else {"type": "http", "session": session}
    return SimpleNamespace(request=SimpleNamespace(scope=scope))  # gr.Request wraps starlette's


def test_no_session_no_token():
    assert hub_token(None) is None
    assert hub_token(_request()) is None  # an app without OAuth has no session at all
    assert hub_token(_request({})) is None


def test_the_signed_session_gives_the_token_until_it_expires():
    live = {"oauth_info": {"access_token": "hf_visitor", "expires_at": time.time() + 600}}
    assert hub_token(_request(live)) == "hf_visitor"
    dead = {"oauth_info": {"access_token": "hf_visitor", "expires_at": time.time() - 1}}
    assert hub_token(_request(dead)) is None


def test_the_handlers_do_not_ask_gradio_for_a_token_parameter():
    """A gr.OAuthToken parameter lets a caller supply any token in the request body and changed how
    the front end runs the load event (presenter keys stopped answering): the browse and Datasets
    handlers read the session through signin.hub_token instead."""
    import gradio as gr

    from viewer.config import Settings
    from viewer.ui import create_app

    demo = create_app(Settings())
    # a browser-only event (js=..., no Python function: the notes panel copies the view's selection) has no parameters
    names = {f.fn.__name__ for f in demo.fns.values() if f.fn is not None
             and any(p.annotation in (gr.OAuthToken, gr.OAuthToken | None, "gr.OAuthToken | None")
                    for p in __import__("inspect").signature(f.fn).parameters.values())}
    assert names == set()  # off a Space the capture tab has no sign-in handlers either
