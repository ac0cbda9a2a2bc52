"""Open a page in headless Chromium (Debian's ``chromium``) through the DevTools protocol: what a reader sees (the
page's text), whether every image decoded, every console message, uncaught exception and browser log error the
page caused, every request it sent (the Network domain's ``requestWillBeSent``), whether it overflows sideways at
the window's width, and the values of extra expressions evaluated in it."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import pytest
from websockets.sync.client import connect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
"""The browser (None where it is not installed; .ci/run installs Debian's package)."""
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it, and in CI its absence fails)")
"""Marks a browser test: skipped on a developer machine without Chromium, run (and failing) in CI without it."""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--hide-scrollbars")


@dataclass
class Rendered:
    """What a page showed once loaded."""

    text: str
    """``document.body.innerText``."""
    images: int
    """``<img>`` elements."""
    broken_images: int
    """Images that did not decode (``naturalWidth`` 0)."""
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and the browser's log errors (failed loads, ...)."""
    console: list[str] = field(default_factory=list)
    """Every console message, of any level."""
    requests: list[str] = field(default_factory=list)
    """URLs of every request the page sent, but the page's own file and ``data:`` URLs."""
    overflow: int = 0
    """Pixels the document is wider than the window (0: no horizontal scrolling)."""
    dialogs: int = 0
    """JavaScript dialogs (``alert`` ...) the page opened."""
    values: dict = field(default_factory=dict)
    """The value of each extra expression, by name."""


class _Session:
    """One DevTools connection; :meth:`call` waits for its answer, keeping the events that arrive meanwhile."""

    def __init__(self, url: str):
        self.socket = connect(url, max_size=None, open_timeout=20)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, session: str | None = None, timeout: float = 20, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv(timeout=timeout))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def close_browser(self) -> None:
        """Ask the browser to exit (it may drop the connection before answering)."""
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": "Browser.close", "params": {}}))
        try:
            self.socket.recv(timeout=10)
        except Exception:  # the connection closed as the browser exited: what was asked
            pass
        self.socket.close()

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.socket.recv(timeout=max(deadline - time.monotonic(), 0.01))))


def render(path: str, timeout: float = 60, width: int | None = None, probes: dict[str, str] | None = None
           ) -> Rendered:
    """Load the file ``path`` in a fresh headless Chromium and report what it showed (:class:`Rendered`):
    ``width`` emulates a phone's screen of that many CSS pixels; ``probes`` are JavaScript expressions (by name)
    whose JSON-able values are returned (awaited if promises)."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                    "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = None
            deadline = time.monotonic() + timeout
            while url is None and time.monotonic() < deadline:
                line = browser.stderr.readline()
                if not line and browser.poll() is not None:
                    raise RuntimeError(f"chromium exited with {browser.returncode} before DevTools listened")
                found = re.search(r"DevTools listening on (ws://\S+)", line)
                url = found and found[1]
            if url is None:
                raise RuntimeError("chromium's DevTools did not start in time")
            devtools = _Session(url)
            target = devtools.call("Target.createTarget", url="about:blank")["targetId"]
            session = devtools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                devtools.call(f"{domain}.enable", session)
            if width is not None:
                devtools.call("Emulation.setDeviceMetricsOverride", session, width=width, height=844,
                              deviceScaleFactor=1, mobile=True)
            page_url = f"file://{os.path.abspath(path)}"
            devtools.call("Page.navigate", session, url=page_url)
            devtools.wait_for("Page.loadEventFired", timeout)
            probe = ("JSON.stringify({text: document.body.innerText, images: document.images.length, broken:"
                     " Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).length,"
                     " overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth})")
            shown = json.loads(devtools.call("Runtime.evaluate", session, expression=probe)["result"]["value"])
            values = {}
            for name, expression in (probes or {}).items():
                result = devtools.call("Runtime.evaluate", session, expression=expression, awaitPromise=True,
                                       returnByValue=True)
                values[name] = result["result"].get("value")
            devtools.close_browser()  # its renderers exit with it, before the profile is removed
            browser.wait(timeout=20)
        finally:
            if browser.poll() is None:
                browser.kill()
                browser.wait()
    errors, console, requests, dialogs = [], [], [], 0
    for event in devtools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            console.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != page_url and not url.startswith("data:"):
                requests.append(url)
        dialogs += method == "Page.javascriptDialogOpening"
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(f"exception: {details.get('text', '')} {details.get('exception', {}).get('description', '')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}")
    return Rendered(shown["text"], shown["images"], shown["broken"], errors, console, requests, shown["overflow"],
                    dialogs, values)
