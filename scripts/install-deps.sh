#!/usr/bin/env bash
# Installs the system packages tokengate needs, only those that are missing (Debian 12, as root or with
# sudo). Usage: scripts/install-deps.sh [build|test]
#   build: the two declared system libraries (OpenSSL 3, libnghttp2) and what SwiftPM needs to find them.
#   test:  also the real clients and servers the test suite drives: curl, openssl, nghttp/h2load, python3
#          with cryptography (the independent token implementation), h2 (HTTP/2 attack frames) and grpcio
#          (the gRPC peer of the HTTP/2 upstream tests),
#          PostgreSQL (a throwaway server for the store tests), chromium (the token page in a browser), nginx
#          and Caddy (the front proxies of the forward-auth tests) and
#          what scripts/validate-deploy.sh uses (PyYAML, strace, systemd-analyze, jq, man, zsh, fish), the
#          languages of the token-minting examples (scripts/test-examples.sh), and the web frameworks whose
#          session cookies tokengate reads (Rails and Express with cookies and keygrip from Debian, Flask with
#          Flask-Login and Django from PyPI; scripts/frameworks/).
set -euo pipefail
profile="${1:-build}"

packages=(libssl-dev libnghttp2-dev pkg-config libsqlite3-dev libpq-dev zlib1g-dev)
if [ "$profile" = "test" ]; then
  packages+=(curl openssl nghttp2-client python3 python3-cryptography python3-pip procps postgresql chromium)
  # A real OAuth 2.0 client (Authlib) as the app of the refresh-token tests.
  packages+=(python3-authlib python3-requests)
  # scripts/validate-deploy.sh (run by scripts/test.sh): YAML, the syscall-filter check, systemd-analyze; the suite's
  # socket-activation test runs the gateway under systemd-socket-activate (package systemd).
  packages+=(python3-yaml strace systemd jq)
  # scripts/validate-deploy.sh's release checks: objdump (the .deb's Depends), man, and the zsh and fish that
  # parse the completions.
  packages+=(binutils man-db zsh fish)
  # scripts/test-examples.sh: the token-minting examples of docs/examples, each with Debian's own packages.
  packages+=(python3-jwt ruby ruby-jwt golang-go golang-github-golang-jwt-jwt-dev nodejs php-cli default-jdk-headless)
  # scripts/test-quickstart.sh: docs/quickstart.md's whoami endpoints in the real frameworks.
  packages+=(python3-flask python3-django node-express node-cookie-parser ruby-railties ruby-webrick)
  # scripts/soak.sh (run by scripts/test.sh): the healthy backend.
  packages+=(nginx)
  # The forward-auth tests' real front proxies: nginx (auth_request) and Caddy (forward_auth), each started by the
  # tests themselves from deploy/forward-auth/.
  packages+=(caddy)
  # The session-cookie tests' real frameworks (scripts/frameworks/): Rails 6.1 and Express with keygrip.
  packages+=(ruby-actionpack node-cookies node-keygrip)
  # The OpenID provider of the identity-provider key tests is installed from PyPI into a venv (below).
  packages+=(python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  # (Not `dpkg-query | grep -q`: under pipefail that fails when grep stops reading first.)
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tokengate: installing system packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts nginx's own daemon where it can; the tests start the ones they need, on ports of their own.
  if [[ " ${missing[*]} " == *" nginx "* ]]; then
    $SUDO service nginx stop >/dev/null 2>&1 || true
  fi
  if [[ " ${missing[*]} " == *" caddy "* ]]; then
    $SUDO service caddy stop >/dev/null 2>&1 || true
  fi
fi

# The HTTP/2 flood tests craft frames with Python's h2 (PyPI).
if [ "$profile" = "test" ] && ! python3 -c 'import h2' >/dev/null 2>&1; then
  echo "tokengate: installing the Python h2 package for the HTTP/2 attack tests"
  python3 -m pip install --quiet h2 || python3 -m pip install --quiet --break-system-packages h2
fi

# The WebSocket tunnel tests' client and backend: Python's websockets (PyPI).
if [ "$profile" = "test" ] && ! python3 -c 'import websockets.asyncio.client' >/dev/null 2>&1; then
  echo "tokengate: installing the Python websockets package for the WebSocket tests"
  python3 -m pip install --quiet 'websockets>=13' || python3 -m pip install --quiet --break-system-packages 'websockets>=13'
fi

# The HTTP/2 upstream tests' real gRPC peer (scripts/grpc/echo_server.py): grpcio from PyPI.
if [ "$profile" = "test" ] && ! python3 -c 'import grpc' >/dev/null 2>&1; then
  echo "tokengate: installing grpcio for the HTTP/2 upstream tests"
  python3 -m pip install --quiet grpcio || python3 -m pip install --quiet --break-system-packages grpcio
fi

# The session-cookie tests' Python frameworks (PyPI): Flask with Flask-Login, and Django.
if [ "$profile" = "test" ] && ! python3 -c 'import flask, flask_login, django' >/dev/null 2>&1; then
  echo "tokengate: installing Flask, Flask-Login and Django for the session-cookie tests"
  python3 -m pip install --quiet flask flask-login django \
    || python3 -m pip install --quiet --break-system-packages flask flask-login django
fi

# The identity-provider key tests (IdentityProviderKeysTests) fetch keys from a real OpenID provider:
# django-oauth-toolkit with OpenID Connect on (scripts/oidc-provider/), in a venv of its own so that its Django
# does not replace Debian's (scripts/test-quickstart.sh uses that one).
oidc_venv="$(cd "$(dirname "$0")/.." && pwd)/.build/oidc-provider"
if [ "$profile" = "test" ] && ! "$oidc_venv/bin/python" -c 'import oauth2_provider' >/dev/null 2>&1; then
  echo "tokengate: installing django-oauth-toolkit into .build/oidc-provider for the identity-provider key tests"
  mkdir -p "$(dirname "$oidc_venv")"
  python3 -m venv "$oidc_venv"
  "$oidc_venv/bin/pip" install --quiet django-oauth-toolkit==3.4.1
fi

if ! command -v swift >/dev/null 2>&1; then
  if [ -x /opt/swift/usr/bin/swift ]; then
    echo "export PATH=/opt/swift/usr/bin:\$PATH" > /dev/null
  else
    echo "tokengate: Swift 6 is needed (https://www.swift.org/install/linux/); 'swift' is not on PATH." >&2
    exit 1
  fi
fi
