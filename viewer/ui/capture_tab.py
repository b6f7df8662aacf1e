"""The Capture screen: run one live capture in the background, watch it, open the result.

A start handler launches the job in :data:`viewer.capture.runner.RUNNER` (one capture per
app) and activates a ``gr.Timer`` that polls its snapshot; ``?job=<id>`` re-attaches after
a reload (docs/GRADIO.md §4). While it runs, each tick also asks the shared follower of the capture
folder (viewer/live.py, :func:`viewer.ui.live_view.live_values`): every call the proxy has recorded is
in the turn list with its ids, logprobs and mask, the newest shown unless the visitor picked another,
and the call in flight is said to be generating. When it ends, the finished folder is opened as any
folder is (what is shown is what opening it shows). The timer pauses while the browser tab is hidden (the
follow timer's visibility hook, viewer/ui/live_view.py) and runs again when it is shown.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from .. import render
from ..capture.fields import BACKENDS, MODELS, capture_spec
from ..capture.policy import check_start, is_public
from ..capture.runner import RUNNER, CaptureBusy
from ..capture.spec import CaptureSpec, new_capture_dir
from ..config import Settings
from ..layout import PROXY_TRACE, TRACE
from ..live import LIVE
from ..visitor import VisitorError, deep_link, job_id as valid_job_id
from .live_view import VISIBILITY_JS, live_values
from .signin import space_sign_in

__all__ = ["build", "progress_html", "form_spec"]


progress_html = render.capture_progress_html


def install_note(settings: Settings) -> str:
    """Said before Start when this machine lacks what a local capture needs: the first one installs it."""
    from ..capture.environment import SETUP_SCRIPT, missing

    need = missing("local", settings.capture_vllm_python, settings.capture_opencode)
    if not need:
        return ""
    what = " and ".join(need)
    if not settings.capture_auto_setup:
        return render.notice_html(f"Local backend: {what} not installed here; run `make setup` (or bash "
                                  f"{SETUP_SCRIPT}) before a local capture.", "error")
    return render.notice_html(f"Local backend: the first capture installs {what} ({SETUP_SCRIPT}: several "
                              "minutes and a few GB, once) before the agent starts.")


def form_spec(settings: Settings, public: bool, token: str, backend_v, model_v, endpoint_v, idx, deep, scr, instr,
              a_to, mtok, repo_v, pieces_v, rescore_v=True) -> CaptureSpec:
    """The form's values as a spec, through the one builder (viewer/capture/fields.py): an emptied box
    takes the setting, as the box's initial value did; raises VisitorError naming a bad field."""
    return capture_spec(settings, out="", public=public, token=token, backend=backend_v, model=model_v,
                        endpoint=endpoint_v, task_source="deepcoder" if deep else "bundled", task_index=idx,
                        instruction=instr, scripted=bool(scr), agent_timeout_s=a_to, max_output_tokens=mtok,
                        results_repo=repo_v, spell_tool_call_as_pieces=bool(pieces_v), rescore=bool(rescore_v))


def build(settings: Settings, store, browse, demo=None) -> None:
    """Create this screen's components inside the current gr.Tab and wire its events (``demo``: the app,
    whose page load re-attaches ``?job=<id>``)."""
    job_state = gr.State(None)
    live_state = gr.State(None)  # the running capture's follow: the version and turn shown
    public = is_public(settings)
    # Sign-in works on a Space (gradio's OAuth routes); elsewhere a LoginButton would need this
    # machine's own HF login, so a public app off a Space simply allows no capture.
    oauth = public and space_sign_in()
    with gr.Column(elem_id="capture-panel"):
        gr.Markdown("Run a real opencode agent on one task through the recording proxy in front of vLLM. "
                    "CPU models are for development; use `endpoint` or `hf-jobs` for a real model on a GPU.")
        if public:
            # Only in public mode: a LoginButton outside a Space would need a local HF login.
            gr.HTML(render.notice_html(
                "This is a public app: captures run as Hugging Face Jobs on your own account, under your "
                "sign-in. The local and endpoint backends are off (they would run the agent on, or make calls "
                "from, this server); the owner can allow named users with CAPTURE_ALLOW_USERS."),
                elem_id="capture-public-note")
            if oauth:
                gr.LoginButton(elem_id="capture-login")
            else:
                gr.HTML(render.notice_html("Sign-in needs the app to run as a Hugging Face Space (hf_oauth); "
                                           "here no capture can be started.", "error"))
        with gr.Row():
            backend = gr.Dropdown(list(BACKENDS), value="hf-jobs" if public else "local",
                                  label="Backend", elem_id="capture-backend")
            model = gr.Dropdown(list(MODELS), value=settings.capture_model, allow_custom_value=True, label="Model",
                                elem_id="capture-model")
            endpoint = gr.Textbox(label="Endpoint URL (endpoint backend)", placeholder="http://host:8000",
                                  elem_id="capture-endpoint")
        with gr.Row():
            task_index = gr.Number(CaptureSpec.task_index, precision=0, minimum=0, label="Bundled task index", elem_id="capture-task")
            deepcoder = gr.Checkbox(False, label="DeepCoder task (online)", elem_id="capture-deepcoder")
            scripted = gr.Checkbox(True, label="Scripted expert (bundled tasks)", elem_id="capture-scripted")
            pieces = gr.Checkbox(False, label="Spell <tool_call> as plain pieces (logit_bias on the special tokens)",
                                 elem_id="capture-pieces")
            # the rescore phase asks the server for every scripted call's unconstrained logprobs (a minute of
            # a CPU server's time): off, the calls keep the sampler's constrained values (summary: rescored false)
            rescore = gr.Checkbox(True, label="Rescore after the capture (trainer-side logprobs)",
                                  elem_id="capture-rescore")
        instruction = gr.Textbox(label="Custom instruction (overrides the task; no held-out tests)", lines=2,
                                 elem_id="capture-instruction")
        with gr.Row():
            agent_timeout = gr.Number(settings.capture_agent_timeout_s, label="Agent timeout (s)",
                                      elem_id="capture-agent-timeout")
            max_tokens = gr.Number(settings.capture_max_output_tokens, precision=0, label="Max tokens per call",
                                   elem_id="capture-max-tokens")
            token = gr.Textbox(label="HF token (endpoint / hf-jobs; else HF_TOKEN)", type="password",
                               elem_id="capture-token", visible=not public)  # public: the sign-in's token
            results_repo = gr.Textbox(settings.capture_results_repo, label="Results dataset repo (hf-jobs)",
                                      elem_id="capture-results-repo")
        if not public:
            gr.HTML(install_note(settings), elem_id="capture-install-note")
        with gr.Row():
            start = gr.Button("Start capture", variant="primary", elem_id="capture-start")
            cancel = gr.Button("Cancel", variant="stop", elem_id="capture-cancel")
        progress = gr.HTML(progress_html(None, None), elem_id="capture-progress")
    timer = gr.Timer(1.0, active=False)
    # the timer runs while a capture is watched and the page is seen: the visibility hook (live_view's, on a
    # carrier of its own) stops it while the browser tab is hidden and starts it again when it is shown
    watching = gr.Checkbox(False, visible=False)  # a capture is watched (until its finished view is opened)
    hidden = gr.Checkbox(False, visible=False)  # document.hidden, put in by the hook's js
    carrier = gr.HTML("", js_on_load=VISIBILITY_JS, elem_id="capture-visibility", apply_default_css=False)

    def _owner(request: gr.Request | None, profile=None) -> str:
        # who started a capture: the signed-in username in public mode (survives a reload), else
        # the browser session. A ?job= link lets others watch (not in public mode), never cancel.
        if public:
            user = getattr(profile, "username", None)
            return f"user:{user}" if user else "user:?"
        return getattr(request, "session_hash", None) or ""

    def start_capture(backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to, mtok, token_v, repo_v, pieces_v,
                      rescore_v, request, username: str = "", oauth_token: str = ""):
        def refuse(msg: str):
            return gr.skip(), render.notice_html(msg, "error"), gr.Timer(active=False), gr.skip()

        d = check_start(settings, backend_v, public=public, username=username, oauth_token=oauth_token,
                        typed_token="" if public else (token_v or ""), endpoint=endpoint_v or "")
        if not d.allowed:
            return refuse(d.message)
        try:  # every field through the one validator (viewer/visitor.py) before anything acts on it
            spec = form_spec(settings, public, d.token, backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to,
                             mtok, repo_v, pieces_v, rescore_v)
        except VisitorError as e:
            return refuse(f"Not started: {e}.")
        spec.out = str(new_capture_dir(settings.capture_out_root))  # unique, created exclusively
        try:
            owner = f"user:{d.owner}" if public else _owner(request)
            job_id = RUNNER.start(spec, owner=owner, max_wall_s=settings.capture_max_wall_s)
        except CaptureBusy as e:
            Path(spec.out).rmdir()  # made for this start, still empty
            return gr.skip(), render.notice_html(str(e), "error"), gr.Timer(active=True), gr.skip()
        return job_id, progress_html(RUNNER.snapshot(job_id), job_id), gr.Timer(active=True), True

    if oauth:
        def on_start(backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to, mtok, token_v, repo_v, pieces_v,
                     rescore_v, request: gr.Request, profile: gr.OAuthProfile | None, oauth: gr.OAuthToken | None):
            return start_capture(backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to, mtok, token_v, repo_v,
                                 pieces_v, rescore_v, request, getattr(profile, "username", "") or "",
                                 getattr(oauth, "token", "") or "")
    else:
        def on_start(backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to, mtok, token_v, repo_v, pieces_v,
                     rescore_v, request: gr.Request):
            return start_capture(backend_v, model_v, endpoint_v, idx, deep, scr, instr, a_to, mtok, token_v, repo_v,
                                 pieces_v, rescore_v, request)

    def on_tick(job_id, live, turn, *filters):
        snap = RUNNER.snapshot(job_id)
        skip = [gr.skip()] * len(browse.outputs)
        if snap is None:
            return [progress_html(None, None), gr.Timer(active=False), gr.skip(), gr.skip(), False] + skip
        out = Path(snap["out"])
        if RUNNER.running(job_id):
            live, values, tabs = live_capture(out, live, turn, snap.get("phase"), filters)
            # (the timer left as the page has it: a tick answered after the tab was hidden must not restart it)
            return [progress_html(snap, job_id), gr.skip(), live, tabs, gr.skip()] + values
        html = progress_html(snap, job_id)
        LIVE.forget(out)  # followed no longer: the finished folder opens as any folder does
        if snap.get("status") == "ok" and (out / TRACE).exists():
            try:
                op = store.open(out)
                return [html, gr.Timer(active=False), None, gr.skip(), False] + \
                    list(browse.show_fn(op, None, f"Opened capture {out.name}"))
            except Exception as e:  # the capture is on disk; say why it did not open
                html += render.notice_html(f"capture finished but could not be opened: {e}", "error")
        return [html, gr.Timer(active=False), None, gr.skip(), False] + skip

    def live_capture(out: Path, live, turn, phase, filters=()):
        """The calls recorded so far (the proxy's record file, read from where the last tick stopped)."""
        if not (out / PROXY_TRACE).is_file():
            return live, [gr.skip()] * len(browse.outputs), gr.skip()
        before = (live or {}).get("version") if (live or {}).get("path") == str(out) else None
        live, values = live_values(settings, store, browse, out, live, turn,
                                   lambda ro, polled: _capture_note(ro, phase), min_turns=1, filters=filters)
        new = live.get("version") is not None and live.get("version") != before
        # the first calls recorded switch to the Tokens tab; after that the visitor's tab is theirs
        return live, values, (gr.Tabs(selected="tokens") if new and before is None else gr.skip())

    def _capture_note(ro, phase) -> str:
        n = len(ro.turns)
        said = f"Live capture: {n} call{'s' if n != 1 else ''} recorded; "
        if phase == "agent":  # the agent is working: its next call is with the model
            return said + f"call {n + 1} generating… (the view follows the newest call unless you pick another)"
        return said + f"the agent is done ({phase} phase); the finished capture opens when it ends"

    def cancel_capture(job_id, owner: str):
        if RUNNER.get(job_id) is None:
            return render.notice_html("No capture to cancel.")
        if not RUNNER.cancel(job_id, owner=owner):
            return (render.notice_html("This capture was started by someone else (another browser session or "
                                       "account): only they can cancel it.", "error")
                    + progress_html(RUNNER.snapshot(job_id), job_id))
        return progress_html(RUNNER.snapshot(job_id), job_id)

    def load_job(job_id, owner: str):
        job_id = valid_job_id(job_id)
        if not job_id or RUNNER.get(job_id) is None:
            return gr.skip(), gr.skip(), gr.Timer(active=False), gr.skip()
        if public and RUNNER.owner(job_id) != owner:  # a public app shows a capture to its owner only
            return gr.skip(), render.notice_html("That capture belongs to another account.", "error"), \
                gr.Timer(active=False), gr.skip()
        return job_id, progress_html(RUNNER.snapshot(job_id), job_id), gr.Timer(active=True), True

    if oauth:
        def on_cancel(job_id, request: gr.Request, profile: gr.OAuthProfile | None):
            return cancel_capture(job_id, _owner(request, profile))

        def on_load(request: gr.Request, profile: gr.OAuthProfile | None):
            return load_job(deep_link(request.query_params if request is not None else {}).job,
                            _owner(request, profile))
    else:
        def on_cancel(job_id, request: gr.Request):
            return cancel_capture(job_id, _owner(request))

        def on_load(request: gr.Request):
            return load_job(deep_link(request.query_params if request is not None else {}).job, _owner(request))

    inputs = [backend, model, endpoint, task_index, deepcoder, scripted, instruction, agent_timeout, max_tokens, token,
              results_repo, pieces, rescore]
    start.click(on_start, inputs, [job_state, progress, timer, watching], concurrency_limit=1, concurrency_id="capture-start",
                api_visibility="private")
    timer.tick(on_tick, [job_state, live_state, browse.turn, *getattr(browse, "filters", [])],
               [progress, timer, live_state, browse.tabs, watching] + list(browse.outputs), api_visibility="private",
               show_progress="hidden", postprocess=False)  # browse.show_fn's values come serialised
    cancel.click(on_cancel, [job_state], [progress], api_visibility="private")
    if demo is not None:
        demo.load(on_load, None, [job_state, progress, timer, watching], api_visibility="private",
                  show_progress="hidden")

    def on_visibility(is_watching, is_hidden):
        return gr.Timer(active=bool(is_watching) and not is_hidden)

    carrier.click(on_visibility, [watching, hidden], [timer], js="(w, h) => [w, document.hidden]",
                  api_name="capture_visibility", api_visibility="private", show_progress="hidden")
