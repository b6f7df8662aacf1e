"""viewer/ui/signin.py: Hub reads take the visitor's token from Gradio's signed session only."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

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


def test_what_gradios_own_oauth_callback_stores_is_what_hub_reads_use(monkeypatch):
    """Not a dict we wrote: Gradio's own login callback (its local stand-in for the Space's, the same session
    key) stores the sign-in in its signed session cookie, and a later request's hub_token reads it back. A
    rename of Gradio's session key fails here."""
    import gradio.oauth
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse
    from fastapi.testclient import TestClient

    from viewer.ui.signin import space_sign_in

    monkeypatch.delenv("SPACE_ID", raising=False)
    assert not space_sign_in()  # off a Space Gradio mounts its mocked routes: no HF account is asked for here
    monkeypatch.setattr(gradio.oauth, "_get_mocked_oauth_info", lambda: {
        "access_token": "hf_signed_in_visitor", "token_type": "bearer", "scope": "openid profile",
        "expires_at": int(time.time()) + 60, "userinfo": {"preferred_username": "visitor"}})
    app = FastAPI()
    with pytest.warns(UserWarning, match="mocked with your profile"):  # Gradio says so off a Space
        gradio.oauth.attach_oauth(app)

    async def token(request):  # a plain Starlette route: the request as Gradio's gr.Request wraps it
        return JSONResponse({"token": hub_token(SimpleNamespace(request=request))})

    app.add_route("/token", token)

    with TestClient(app, base_url="https://testserver") as http:  # the session cookie is https-only
        assert http.get("/token").json() == {"token": None}
        http.get("/login/callback", follow_redirects=False)
        assert http.get("/token").json() == {"token": "hf_signed_in_visitor"}
        http.get("/logout", follow_redirects=False)
        assert http.get("/token").json() == {"token": None}


@pytest.mark.parametrize("env", [{}, {"SPACE_ID": "o/s"}, {"SYSTEM": "spaces"}, {"SYSTEM": "spaces", "SPACE_ID": "o/s"},
                                 {"SYSTEM": "other", "SPACE_ID": "o/s"}, {"SYSTEM": "spaces", "SPACE_ID": ""}])
def test_the_login_button_is_offered_exactly_where_gradio_mounts_its_real_oauth_routes(env, monkeypatch):
    """Elsewhere Gradio's routes sign every visitor in as this machine's own HF login."""
    from gradio.utils import get_space

    from viewer.ui.signin import space_sign_in

    for k in ("SYSTEM", "SPACE_ID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert space_sign_in() == (get_space() is not None) == space_sign_in(env)
