"""The Capture tab's timer pauses while the browser tab is hidden (issue 39, point 3), in a real browser.

A real capture job (the runner, the endpoint backend) is started from the Capture tab against a server that
answers one byte every two seconds: the capture stays in its server phase, running, for the length of the
test. The page's timer asks about it every second; while the tab is hidden (``visibilitychange``) it sends
nothing, and it asks again once the tab is shown. The page's requests are counted as chromium sends them.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

pytestmark = pytest.mark.browser

HIDE = ("h => { Object.defineProperty(document, 'hidden', {value: h, configurable: true}); "
        "document.dispatchEvent(new Event('visibilitychange')); }")


class Trickle:
    """An HTTP server that never finishes its answer: one byte of a status line every ``every`` seconds (each
    read of the client's gets a byte, so no read times out)."""

    def __init__(self, every: float = 2.0):
        self.every, self.stop = every, threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            for b in b"HTTP/1.1 200 OK\r\n":
                if self.stop.wait(self.every):
                    return
                try:
                    conn.send(bytes([b]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def test_the_capture_timer_stops_while_the_tab_is_hidden(page, app, app_url):
    from viewer.capture.runner import RUNNER  # the app runs in this process

    demo = app[0]
    tick = next(i for i, fn in demo.fns.items() if fn.api_name == "on_tick")  # the Capture tab's timer
    asked: list[float] = []

    def count(req) -> None:
        if req.method == "POST" and "/queue/join" in req.url:
            try:
                body = req.post_data_json or {}
            except ValueError:
                return
            if body.get("fn_index") == tick:
                asked.append(time.monotonic())

    page.on("request", count)
    server = Trickle()
    job = None
    earlier = set(RUNNER.jobs)  # (the runner is the process's: jobs of other tests may be there)
    try:
        page.goto(app_url + "/")
        page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
        page.get_by_role("tab", name="Capture").click()
        page.locator("#capture-backend input").fill("endpoint")
        page.keyboard.press("Enter")
        field = page.locator("#capture-endpoint textarea, #capture-endpoint input").first
        field.fill(server.url)
        field.press("Tab")  # (a clean run started a job with no endpoint: the click came before the value was taken)
        page.wait_for_function("u => [...document.querySelectorAll('#capture-endpoint textarea, #capture-endpoint "
                               "input')].some(e => e.value === u)", arg=server.url, timeout=30000)
        page.locator("#capture-start").click()
        page.wait_for_function("document.querySelector('#capture-progress')?.textContent.includes('phase server')",
                               timeout=60000)
        started = {j: str(RUNNER.jobs[j].spec.endpoint) for j in list(RUNNER.jobs) if j not in earlier}
        job = next((j for j, url in started.items() if server.url in url), None)
        assert job is not None and RUNNER.running(job), (server.url, started, job and RUNNER.running(job))
        n = len(asked)
        deadline = time.monotonic() + 10
        while len(asked) < n + 2:  # shown: the timer asks every second
            assert time.monotonic() < deadline, "the Capture tab's timer did not ask while the tab was shown"
            page.wait_for_timeout(200)
        page.evaluate(HIDE, True)
        page.wait_for_timeout(1500)  # a tick already on its way may still be sent
        before = len(asked)
        page.wait_for_timeout(4000)  # an absence is only seen by waiting: four periods without a request
        assert len(asked) == before, f"{len(asked) - before} requests while hidden"
        assert RUNNER.running(job)  # still running: the timer stopped for the hidden tab, not for the end
        page.evaluate(HIDE, False)
        deadline = time.monotonic() + 10
        while len(asked) <= before:  # shown again: it asks again
            assert time.monotonic() < deadline, "the Capture tab's timer did not start again when shown"
            page.wait_for_timeout(200)
    finally:
        server.close()  # the capture's endpoint check fails now: the job ends
        for j in [j for j in list(RUNNER.jobs) if j not in earlier]:  # every job this test started, found or not
            RUNNER.cancel(j)  # (one left running was the next test's stray processes)
            RUNNER.wait(j, timeout=60)
