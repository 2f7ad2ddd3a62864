"""The OpenID provider the gateway's tests fetch keys from: django-oauth-toolkit (PyPI) behind TLS on loopback.

    serve.py --state DIR --cert CERT --key KEY [--port N] [--jwks-max-age SECONDS]

Binds 127.0.0.1 (port 0 picks one), prints "listening PORT" once it accepts, and serves until killed. The
first start in DIR makes the database, the user "alice" (password "alice-password") and the public client
"tokengate-app" (authorization code with PKCE, redirect http://127.0.0.1/callback, consent skipped), and an
RSA signing key in DIR/keys/active.pem unless one is there. `rotate.py DIR` rotates the key; a restart then
publishes both. Django's own WSGI handler serves the requests (a threading wsgiref server wrapped in TLS).
"""
import argparse
import os
import secrets
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

parser = argparse.ArgumentParser()
parser.add_argument("--state", required=True)
parser.add_argument("--cert", required=True)
parser.add_argument("--key", required=True)
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--jwks-max-age", type=int, default=3600)
args = parser.parse_args()

# A parent that ignores SIGTERM (a test runner with signal handlers) passes that on through exec: restore it.
signal.signal(signal.SIGTERM, signal.SIG_DFL)
state = Path(args.state)
(state / "keys").mkdir(parents=True, exist_ok=True)
if not (state / "django-secret").exists():
    (state / "django-secret").write_text(secrets.token_urlsafe(48))
if not (state / "keys" / "active.pem").exists():
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
         "-out", str(state / "keys" / "active.pem")],
        check=True, capture_output=True,
    )


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        sys.stderr.write("op: " + (format % args) + "\n")


server = Server(("127.0.0.1", args.port), Quiet)
port = server.server_address[1]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(args.cert, args.key)
server.socket = context.wrap_socket(server.socket, server_side=True)

os.environ["TOKENGATE_OP_DIR"] = str(state)
os.environ["TOKENGATE_OP_ISSUER"] = f"https://127.0.0.1:{port}/o"
os.environ["TOKENGATE_OP_JWKS_MAX_AGE"] = str(args.jwks_max_age)
os.environ["DJANGO_SETTINGS_MODULE"] = "tokengate_op.settings"
sys.path.insert(0, str(Path(__file__).parent))

import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

call_command("migrate", verbosity=0, interactive=False)
from django.contrib.auth.models import User  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402

if not User.objects.filter(username="alice").exists():
    User.objects.create_user("alice", password="alice-password")
if not Application.objects.filter(client_id="tokengate-app").exists():
    Application.objects.create(
        name="tokengate app",
        client_id="tokengate-app",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )

server.set_app(get_wsgi_application())
print(f"listening {port}", flush=True)
server.serve_forever()
