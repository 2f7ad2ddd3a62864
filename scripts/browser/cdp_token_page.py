#!/usr/bin/env python3
# ===----------------------------------------------------------------------===
# This source file is part of tokengate. Licensed under the Apache License v2.0.
# ===----------------------------------------------------------------------===
"""Drives a real headless Chromium through tokengate's token page, as an app's embedded web view would.

  cdp_token_page.py --base https://localhost:PORT --user alice --password pw
                    [--chromium /usr/bin/chromium] [--cert cert.pem] [--timeout 60]
                    [--app NAME [--state S] [--code-challenge C] [--confirm]] [--path P [--press ID] [--cross-site-post BODY]]

Starts Chromium (headless, its own temporary profile, DevTools on a free loopback port), then over the
Chrome DevTools Protocol: opens <base>/token, expects to be sent to the login form, types the user and
password into it and presses the button, waits for the token page, and reports what the browser holds:
the page title, `document.cookie`, the cookies in the browser's store (with their flags), every URL it
requested and the final URL. It asserts nothing itself: it prints one JSON object on stdout and the
Swift test (Tests/TokengateGatewayTests/TokenPageBrowserTests.swift) checks it. The JSON holds the
token (the test must compare it); nothing on stderr does.

With --app (an app's login: `?app=NAME[&state=S][&code_challenge=C&code_challenge_method=S256]`), the page
after the login is whatever the gateway answers for that app: for one it asks first, the confirmation page
(reported as `token_page`, with `html`, the page's markup). With --confirm, the script then presses the
page's "continue" button (`#continue`) and waits for the browser to be sent on: the redirect to the app's
callback (a custom scheme, which a headless browser cannot open) is reported as `redirects` (every 3xx
the browser received: status and `Location`) and, when the browser tried to go there, in `requests`.

With --path (the connected-apps page, say `/token/apps`), that page is opened instead of /token, and what the
browser shows after the login is reported with its devices (`devices`: each row's device id, app, times, whether
it is revoked and has a button) and its notice. With --press ID the script then presses the button of that id (after
reading the page for as long as --confirm does), waits for the page the browser is sent back to, and reports it
as `after`, with its devices again. With --cross-site-post BODY (and --path), the logged-in browser then opens
another site's page (a `data:` URL, an opaque origin) that submits a form with that URL-encoded body to the page
at once, as an attacker's page would; the page the browser lands on is reported as `cross_site`.

TLS: with --cert, Chromium trusts only that certificate's public key
(`--ignore-certificate-errors-spki-list`, effective because the profile is a --user-data-dir), so
the connection is real TLS with a checked (pinned) key rather than "ignore every certificate error".
Without --cert it falls back to `--ignore-certificate-errors`.

Bounded: every wait has a deadline inside --timeout; Chromium runs in its own process group, which is
killed (TERM, then KILL) on every way out, including SIGTERM from a `timeout` wrapper, and it gets
SIGKILL if this script dies first (PR_SET_PDEATHSIG). The temporary profile is removed.

Only the standard library: the WebSocket client (RFC 6455: handshake, masked client text frames,
unmasked server frames, fragments, ping/pong, close) is written out below for plain TCP to 127.0.0.1.
Exit 0 with the JSON on success; 1 with {"error": ...} when the browser could not be driven; 2 on usage.
"""
import argparse
import base64
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# A DevTools message larger than this is refused (the largest here is the cookie list, a few KiB).
MAX_MESSAGE = 8 * 1024 * 1024
PR_SET_PDEATHSIG = 1


class DriveError(Exception):
    """The browser could not be driven; the message never holds a token or a cookie value."""


def log(message):
    print("cdp_token_page: " + message, file=sys.stderr, flush=True)


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self, what):
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise DriveError("timed out: " + what)
        return remaining


# MARK: A minimal WebSocket client (RFC 6455), client side, text frames, plain TCP.


class WebSocket:
    def __init__(self, url, deadline):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "ws" or parsed.hostname not in ("127.0.0.1", "localhost"):
            raise DriveError("the DevTools address is not a loopback ws:// URL")
        self.deadline = deadline
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=deadline.left("connect"))
        self.buffer = b""
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parsed.path or '/'} HTTP/1.1\r\n"
            f"Host: {parsed.hostname}:{parsed.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > 16 * 1024:
                raise DriveError("the WebSocket handshake answer is too long")
            self.buffer += self.recv_some("handshake")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if len(lines[0].split(" ")) < 2 or lines[0].split(" ")[1] != "101":
            raise DriveError("the WebSocket handshake was refused: " + lines[0][:100])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        expected = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            raise DriveError("the WebSocket handshake answer has a wrong Sec-WebSocket-Accept")

    def recv_some(self, what):
        self.sock.settimeout(self.deadline.left(what))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise DriveError("timed out: " + what)
        if not data:
            raise DriveError("the DevTools connection closed (" + what + ")")
        return data

    def read_exactly(self, count, what):
        while len(self.buffer) < count:
            self.buffer += self.recv_some(what)
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def send_frame(self, opcode, payload):
        # Client frames are always masked (RFC 6455 §5.3); FIN set, no fragmentation.
        header = bytes([0x80 | opcode])
        length = len(payload)
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self.send_frame(0x1, text.encode("utf-8"))

    def receive_text(self, what):
        """One whole text message: reassembles fragments, answers pings, refuses binary and close."""
        message = b""
        while True:
            first, second = self.read_exactly(2, what)
            fin, opcode = first & 0x80, first & 0x0F
            length = second & 0x7F
            if length == 126:
                length = struct.unpack("!H", self.read_exactly(2, what))[0]
            elif length == 127:
                length = struct.unpack("!Q", self.read_exactly(8, what))[0]
            if length > MAX_MESSAGE or len(message) + length > MAX_MESSAGE:
                raise DriveError("a DevTools message is too large")
            mask = self.read_exactly(4, what) if second & 0x80 else None
            payload = self.read_exactly(length, what)
            if mask:
                payload = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
            if opcode == 0x9:
                self.send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                raise DriveError("the DevTools connection was closed by the browser")
            if opcode not in (0x0, 0x1):
                raise DriveError(f"unexpected WebSocket opcode {opcode}")
            message += payload
            if fin:
                return message.decode("utf-8")

    def close(self):
        try:
            self.send_frame(0x8, struct.pack("!H", 1000))
        except OSError:
            pass
        self.sock.close()


# MARK: The DevTools protocol over it.


class DevTools:
    def __init__(self, websocket, deadline):
        self.ws = websocket
        self.deadline = deadline
        self.next_id = 0
        # Every event seen, in order; waits look only at events after a mark.
        self.events = []

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send_text(json.dumps(message))
        while True:
            answer = json.loads(self.ws.receive_text(method))
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise DriveError(f"{method} failed: {answer['error'].get('message', '?')}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def mark(self):
        return len(self.events)

    def wait_event(self, method, since, session=None, what=None):
        index = since
        while True:
            while index < len(self.events):
                event = self.events[index]
                index += 1
                if event["method"] == method and (session is None or event.get("sessionId") == session):
                    return event
            event = json.loads(self.ws.receive_text(what or method))
            if "method" in event:
                self.events.append(event)

    def evaluate(self, expression, session):
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session
        )
        if "exceptionDetails" in result:
            raise DriveError("a page script failed: " + result["exceptionDetails"].get("text", "?"))
        return result["result"].get("value")


# MARK: Chromium.


def spki_sha256(cert_path):
    """base64(SHA-256(SubjectPublicKeyInfo)): the body of `openssl x509 -pubkey` is exactly the SPKI DER."""
    output = subprocess.run(
        ["openssl", "x509", "-in", cert_path, "-pubkey", "-noout"], capture_output=True, text=True, timeout=10
    )
    if output.returncode != 0:
        raise DriveError("openssl could not read the certificate: " + output.stderr.strip()[:200])
    body = "".join(line for line in output.stdout.splitlines() if line and not line.startswith("-----"))
    return base64.b64encode(hashlib.sha256(base64.b64decode(body)).digest()).decode()


def die_with_parent():
    """Runs in the child before exec: SIGKILL it if this script dies first, so no browser is ever left over."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_chromium(chromium, profile, cert):
    arguments = [
        chromium,
        "--headless=new",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "--user-data-dir=" + profile,
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--no-proxy-server",
        "--password-store=basic",
        "about:blank",
    ]
    if os.geteuid() == 0:
        arguments.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root.
    if cert:
        arguments.insert(1, "--ignore-certificate-errors-spki-list=" + spki_sha256(cert))
    else:
        arguments.insert(1, "--ignore-certificate-errors")
    with open(os.path.join(os.path.dirname(profile), "chromium.stderr"), "wb") as output:
        return subprocess.Popen(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )


def devtools_address(process, profile, deadline):
    """Chromium writes its port and the browser target's path to DevToolsActivePort once DevTools listens."""
    port_file = os.path.join(profile, "DevToolsActivePort")
    while True:
        if process.poll() is not None:
            raise DriveError(f"chromium exited with status {process.returncode} before DevTools listened")
        try:
            with open(port_file) as handle:
                lines = handle.read().split("\n")
            if len(lines) >= 2 and lines[0].strip().isdigit() and lines[1].startswith("/devtools/browser/"):
                return f"ws://127.0.0.1:{int(lines[0])}{lines[1].strip()}"
        except FileNotFoundError:
            pass
        deadline.left("chromium start (DevToolsActivePort)")
        time.sleep(0.05)


def stop_chromium(process):
    """TERM, then KILL, to the whole process group (the browser, its zygotes and renderers), until it is empty."""
    if process is None:
        return
    group = process.pid
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        # The main process is gone; its helpers may still be exiting. Wait (bounded) until none is left.
        end = time.monotonic() + grace
        while time.monotonic() < end:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=5)


# MARK: The flow.

LOGIN_FORM = """(() => {
  const form = document.querySelector('form');
  if (!form) return null;
  const field = (name) => {
    const input = form.querySelector('input[name="' + name + '"]');
    return input ? {type: input.type, value: input.type === 'hidden' ? input.value : ''} : null;
  };
  return {action: form.getAttribute('action'), method: form.method, user: field('user'),
          password: field('password'), return_to: field('return_to'),
          button: !!form.querySelector('button[type="submit"]')};
})()"""

PAGE_STATE = """(() => ({href: location.href, title: document.title, readyState: document.readyState,
  cookie: document.cookie, body_token: (document.getElementById('token') || {}).textContent || null}))()"""

# The confirmation page: its whole markup (the Swift test looks for what must not be there) and its buttons.
CONFIRMATION_STATE = """(() => ({html: document.documentElement.outerHTML,
  buttons: Array.from(document.querySelectorAll('button')).map((b) => b.id)}))()"""


# The connected-apps page: its rows, its notice and its markup.
CONNECTED_APPS_STATE = """(() => ({html: document.documentElement.outerHTML,
  notice: (document.getElementById('notice') || {}).textContent || null,
  devices: Array.from(document.querySelectorAll('tr.device')).map((row) => ({device: row.dataset.device,
    app: row.querySelector('.app').textContent, created: row.querySelector('.created').textContent,
    refreshed: row.querySelector('.refreshed').textContent, revoked: !!row.querySelector('.revoked'),
    button: !!row.querySelector('button')}))}))()"""


def load(devtools, session, action, what):
    """Runs `action` (which starts a navigation) and waits for the main frame's load event."""
    mark = devtools.mark()
    action()
    devtools.wait_event("Page.loadEventFired", mark, session, what)
    return devtools.evaluate(PAGE_STATE, session)


def type_into(devtools, session, selector, text):
    """Focuses a field and types into it as a keyboard would (input events), not by setting .value."""
    devtools.evaluate(f"document.querySelector({json.dumps(selector)}).focus()", session)
    devtools.call("Input.insertText", {"text": text}, session)


def page_address(base, app, state, challenge, path=None):
    """The token page, an app's login at it, or another page of the route (--path)."""
    if path:
        return base + path
    if not app:
        return base + "/token"
    query = [("app", app)]
    if state:
        query.append(("state", state))
    if challenge:
        query += [("code_challenge", challenge), ("code_challenge_method", "S256")]
    return base + "/token?" + urllib.parse.urlencode(query)


# How long the script "reads" the confirmation page before pressing continue: more than the gateway's minimum
# delay of one second (TokenPageConfirmationKey.minimumDelayMilliseconds).
CONFIRM_DELAY_SECONDS = 1.2


def press_continue(devtools, session):
    """Presses the confirmation page's "continue" and waits until the browser is done with where it was sent: a
    page that loads (a refusal), or a navigation that fails. The redirect to the app's custom scheme, which a
    headless browser cannot open, is such a failure (`net::ERR_ABORTED`), after the browser has reported the
    redirect (`Network.responseReceivedExtraInfo`) and the request it would make (`Network.requestWillBeSent`)."""
    mark = devtools.mark()
    devtools.evaluate("document.querySelector('#continue').click()", session)
    index = mark
    while True:
        while index < len(devtools.events):
            event = devtools.events[index]
            index += 1
            if event.get("sessionId") != session:
                continue
            if event["method"] == "Page.loadEventFired":
                return
            if event["method"] == "Network.loadingFailed" and event["params"].get("type") == "Document":
                return
        event = json.loads(devtools.ws.receive_text("the browser after continue"))
        if "method" in event:
            devtools.events.append(event)


def cross_site_post(devtools, session, target, body):
    """Opens another site's page that posts `body` (URL-encoded) to `target` as soon as it loads, and waits for the
    page the browser is sent to."""
    inputs = "".join(
        '<input type="hidden" name="%s" value="%s">' % (html_escape(name), html_escape(value))
        for name, value in urllib.parse.parse_qsl(body, keep_blank_values=True)
    )
    page = (
        '<!DOCTYPE html><form id="f" method="post" action="%s">%s</form>'
        "<script>document.getElementById('f').submit()</script>" % (html_escape(target), inputs)
    )
    mark = devtools.mark()
    answer = devtools.call(
        "Page.navigate", {"url": "data:text/html;base64," + base64.b64encode(page.encode()).decode()}, session
    )
    if answer.get("errorText"):
        raise DriveError("the other site's page did not load: " + answer["errorText"])
    # The form may go before the data page's own load event: wait for a page loaded from the target.
    index = mark
    while True:
        event = devtools.wait_event("Page.loadEventFired", index, session, "the answer to the other site's form")
        index = devtools.events.index(event) + 1
        state = devtools.evaluate(PAGE_STATE, session)
        if state["href"].startswith(target):
            return state


def html_escape(text):
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def drive(
    devtools, base, user, password, timings, started, app=None, state=None, challenge=None, confirm=False, path=None,
    press=None, attack=None,
):
    target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    devtools.call("Page.enable", session=session)
    devtools.call("Network.enable", session=session)

    def navigate():
        answer = devtools.call("Page.navigate", {"url": page_address(base, app, state, challenge, path)}, session)
        if answer.get("errorText"):
            raise DriveError("the token page did not load: " + answer["errorText"])

    login = load(devtools, session, navigate, "the login page")
    timings["login_page_ms"] = round((time.monotonic() - started) * 1000)
    form = devtools.evaluate(LOGIN_FORM, session)
    if not form or not form.get("user") or not form.get("password") or not form.get("button"):
        return {"login": {"page": {"href": login["href"], "title": login["title"]}, "form": form}}

    type_into(devtools, session, 'form input[name="user"]', user)
    type_into(devtools, session, 'form input[name="password"]', password)
    typed = devtools.evaluate(
        "[document.querySelector('form input[name=\"user\"]').value,"
        " document.querySelector('form input[name=\"password\"]').value.length]",
        session,
    )
    before = time.monotonic()
    token_page = load(
        devtools,
        session,
        lambda: devtools.evaluate("document.querySelector('form button[type=\"submit\"]').click()", session),
        "the token page after the login",
    )
    timings["token_page_ms"] = round((time.monotonic() - before) * 1000)
    if app:
        token_page.update(devtools.evaluate(CONFIRMATION_STATE, session))
    after = None
    if path:
        token_page.update(devtools.evaluate(CONNECTED_APPS_STATE, session))
    if press:
        time.sleep(CONFIRM_DELAY_SECONDS)
        before = time.monotonic()
        pressed = "document.getElementById(" + json.dumps(press) + ").click()"
        after = load(devtools, session, lambda: devtools.evaluate(pressed, session), "the page after the button")
        after.update(devtools.evaluate(CONNECTED_APPS_STATE, session))
        timings["press_ms"] = round((time.monotonic() - before) * 1000)
    cross_site = None
    if attack is not None:
        cross_site = cross_site_post(devtools, session, base + path, attack)
    if confirm:
        # The gateway refuses a click less than a second after the page was made (double-clickjacking): a person
        # reads the page first, and so does this script.
        time.sleep(CONFIRM_DELAY_SECONDS)
        before = time.monotonic()
        press_continue(devtools, session)
        timings["continue_ms"] = round((time.monotonic() - before) * 1000)

    cookies = devtools.call("Storage.getCookies")["cookies"]
    requests = [
        {"url": event["params"]["request"]["url"], "method": event["params"]["request"]["method"]}
        for event in devtools.events
        if event["method"] == "Network.requestWillBeSent" and event.get("sessionId") == session
    ]
    redirects = []
    for event in devtools.events:
        if event["method"] == "Network.responseReceivedExtraInfo" and event.get("sessionId") == session:
            status = event["params"].get("statusCode", 0)
            if 300 <= status < 400:
                headers = {name.lower(): value for name, value in event["params"].get("headers", {}).items()}
                redirects.append({"status": status, "location": headers.get("location")})
    result = {
        "login": {"page": {"href": login["href"], "title": login["title"]}, "form": form, "typed": typed},
        "token_page": token_page,
        "cookies": [
            {
                key: cookie.get(key)
                for key in ("name", "value", "domain", "path", "httpOnly", "secure", "sameSite", "session", "expires")
            }
            for cookie in cookies
        ],
        "requests": requests,
    }
    if app or press:
        result["redirects"] = redirects
    if after is not None:
        result["after"] = after
    if cross_site is not None:
        result["cross_site"] = cross_site
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the site, e.g. https://localhost:8443")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--cert", help="PEM certificate whose public key Chromium should trust (pinned)")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--app", help="open the login of this registered app instead of the plain token page")
    parser.add_argument("--state", help="with --app: the state to send")
    parser.add_argument("--code-challenge", help="with --app: a PKCE S256 challenge to send")
    parser.add_argument("--confirm", action="store_true", help="with --app: press the confirmation page's continue")
    parser.add_argument("--path", help="open this page of the site (the connected-apps page) instead of /token")
    parser.add_argument("--press", help="with --path: press the button of this id and report the page after it")
    parser.add_argument("--cross-site-post", help="with --path: another site's form posts this body to the page")
    options = parser.parse_args()
    if (options.press or options.cross_site_post is not None) and not options.path:
        parser.error("--press and --cross-site-post need --path")
    if (options.state or options.code_challenge or options.confirm) and not options.app:
        parser.error("--state, --code-challenge and --confirm need --app")

    # A `timeout` wrapper's SIGTERM becomes an exception, so the `finally` below still kills the browser.
    def terminate(signum, frame):
        raise DriveError(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    deadline = Deadline(options.timeout)
    started = time.monotonic()
    workspace = tempfile.mkdtemp(prefix="tokengate-chromium-")
    profile = os.path.join(workspace, "profile")
    os.mkdir(profile)
    process = None
    websocket = None
    timings = {}
    try:
        process = start_chromium(options.chromium, profile, options.cert)
        url = devtools_address(process, profile, deadline)
        timings["chromium_start_ms"] = round((time.monotonic() - started) * 1000)
        websocket = WebSocket(url, deadline)
        devtools = DevTools(websocket, deadline)
        version = devtools.call("Browser.getVersion")
        result = drive(
            devtools,
            options.base,
            options.user,
            options.password,
            timings,
            time.monotonic(),
            app=options.app,
            state=options.state,
            challenge=options.code_challenge,
            confirm=options.confirm,
            path=options.path,
            press=options.press,
            attack=options.cross_site_post,
        )
        result["browser"] = version.get("product")
        result["tls"] = "pinned-spki" if options.cert else "ignore-certificate-errors"
        timings["total_ms"] = round((time.monotonic() - started) * 1000)
        result["timings"] = timings
        print(json.dumps(result))
        return 0
    except (DriveError, OSError, ValueError, KeyError, subprocess.SubprocessError) as error:
        log(f"{type(error).__name__}: {error}")
        try:
            with open(os.path.join(workspace, "chromium.stderr"), "rb") as handle:
                tail = handle.read()[-2000:].decode("utf-8", "replace")
            log("chromium's stderr (last lines):\n" + tail)
        except OSError:
            pass
        print(json.dumps({"error": f"{type(error).__name__}: {error}", "timings": timings}))
        return 1
    finally:
        if websocket:
            websocket.close()
        stop_chromium(process)
        shutil.rmtree(workspace, ignore_errors=True)
        if os.path.exists(workspace):  # a helper that was still writing to the profile as it died
            time.sleep(0.5)
            shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
