#!/usr/bin/env bash
# Runs docs/quickstart.md as written: its configuration, and its whoami endpoints in the real frameworks Debian 12
# packages (Flask, Django, Express, Rails), behind the real gateway on loopback, through the token page with curl.
#
# Usage: scripts/test-quickstart.sh [TOKENGATE_BINARY]   (default: the debug build)
# For each framework installed (scripts/install-deps.sh test installs python3-flask, python3-django, node-express
# and ruby-railties): the page's endpoint code, copied out of the page, in a small site with a login; then
#   - /api/ without a token: 401; the token page before logging in: a redirect to the login page;
#   - logging in through the gateway, then the token page: 200 and the auth_token cookie;
#   - that token on /api/: 200, and the backend sees the user in X-Tokengate-User; token verify agrees;
#   - after `tokengate revoke --user`, the same token: 401.
# The page's configuration is used unchanged but for the backend's port; the listen, admin and store locations
# come from TOKENGATE_… variables, as a container would set them.
# Exit status: 0 when every check passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"
tokengate="${1:-${TOKENGATE_BIN:-$(swift build --show-bin-path)/tokengate}}"
work="$(mktemp -d /tmp/tokengate-quickstart.XXXXXX)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
failures=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; failures=$((failures + 1)); }
skip() { echo "  skip  $*"; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The page's configuration and code blocks, as written.
/usr/bin/python3 - "$repo/docs/quickstart.md" "$work" <<'PY'
import re, sys
page, out = open(sys.argv[1]).read(), sys.argv[2]
config = re.search(r"```yaml\n# /etc/tokengate/tokengate.yaml\n(.*?)```", page, re.S).group(1)
open(out + "/tokengate.yaml", "w").write(config)
for name, lang, file in (("Django", "python", "django_whoami.py"), ("Flask", "python", "flask_whoami.py"), ("Express", "js", "whoami.mjs"), ("Rails", "ruby", "rails_whoami.rb")):
    block = re.search(r"### %s\n.*?```%s\n(.*?)```" % (name, lang), page, re.S).group(1)
    open(out + "/" + file, "w").write(block)
PY
mkdir -p "$work/etc/keys" "$work/etc/tls"
cp "$work/tokengate.yaml" "$work/etc/tokengate.yaml"
"$tokengate" keygen --alg EdDSA --out "$work/etc/keys" > /dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=www.example.com \
  -addext subjectAltName=DNS:www.example.com -days 2 -keyout "$work/etc/tls/key.pem" -out "$work/etc/tls/cert.pem" 2> /dev/null
chmod 0600 "$work/etc/tls/key.pem"

run_site() {  # framework port
  local framework="$1" port="$2"
  case "$framework" in
    Flask)
      mkdir -p "$work/flask/yoursite" && cp "$work/flask_whoami.py" "$work/flask/yoursite/tokengate.py"
      cat > "$work/flask/site.py" <<PY
import sys
from flask import Flask, request, session
from yoursite.tokengate import bp
app = Flask(__name__)
app.secret_key = "quickstart-test-only"
app.register_blueprint(bp)
@app.post("/accounts/login/")
def login():
    session["user_id"] = request.form["user"]
    return "logged in"
@app.get("/api/hello")
def hello():
    return request.headers.get("X-Tokengate-User", "")
app.run(host="127.0.0.1", port=$port)
PY
      (cd "$work/flask" && exec /usr/bin/python3 site.py > "$work/site.log" 2>&1) & pids+=($!) ;;
    Django)
      mkdir -p "$work/django/yoursite" && cp "$work/django_whoami.py" "$work/django/yoursite/tokengate.py"
      touch "$work/django/yoursite/__init__.py"
      cat > "$work/django/yoursite/settings.py" <<PY
SECRET_KEY = "quickstart-test-only"
ALLOWED_HOSTS = ["www.example.com"]
ROOT_URLCONF = "yoursite.urls"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware", "django.contrib.auth.middleware.AuthenticationMiddleware"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "$work/django/db.sqlite3"}}
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
PY
      cat > "$work/django/yoursite/urls.py" <<'PY'
from django.contrib.auth import login
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from yoursite import tokengate

@csrf_exempt
def login_view(request):
    user, _ = User.objects.get_or_create(username=request.POST["user"])
    login(request, user)
    return HttpResponse("logged in")

def hello(request):
    return HttpResponse(request.headers.get("X-Tokengate-User", ""))

urlpatterns = [path("tokengate/whoami", tokengate.whoami), path("accounts/login/", login_view), path("api/hello", hello)]
PY
      (cd "$work/django" && DJANGO_SETTINGS_MODULE=yoursite.settings /usr/bin/python3 -m django migrate -v 0 \
        && exec env DJANGO_SETTINGS_MODULE=yoursite.settings /usr/bin/python3 -m django runserver --noreload "127.0.0.1:$port" > "$work/site.log" 2>&1) & pids+=($!) ;;
    Express)
      cat > "$work/site.mjs" <<JS
import { createRequire } from "node:module";
import { whoami } from "./whoami.mjs";
const require = createRequire(import.meta.url);  // Debian's node modules, through NODE_PATH
const express = require("express");
const cookieParser = require("cookie-parser");
const app = express();
// A signed cookie stands in for express-session (not packaged in Debian 12): it sets req.session the same way.
app.use(cookieParser("quickstart-test-only"));
app.use((req, res, next) => { req.session = { userId: req.signedCookies.uid }; next(); });
app.post("/accounts/login/", express.urlencoded({ extended: false }), (req, res) => {
  res.cookie("uid", req.body.user, { signed: true, httpOnly: true }).send("logged in");
});
app.get("/tokengate/whoami", whoami);
app.get("/api/hello", (req, res) => res.send(req.get("X-Tokengate-User") ?? ""));
app.listen($port, "127.0.0.1");
JS
      (cd "$work" && NODE_PATH=/usr/share/nodejs exec node site.mjs > "$work/site.log" 2>&1) & pids+=($!) ;;
    Rails)
      # A one-file Rails application (Debian's railties) with the page's controller loaded as written and the
      # route from its config/routes.rb comment drawn as written. current_user is what Devise would add.
      mkdir -p "$work/rails/app/controllers" && cp "$work/rails_whoami.rb" "$work/rails/app/controllers/tokengate_controller.rb"
      sed -n 's|^# config/routes.rb: *||p' "$work/rails_whoami.rb" > "$work/rails/route.rb"
      cat > "$work/rails/site.rb" <<RUBY
require "action_controller/railtie"
require "rack/handler/webrick"
class Site < Rails::Application
  config.root = __dir__
  config.eager_load = false
  config.secret_key_base = "quickstart-test-only-" * 4
  config.hosts.clear
  config.logger = Logger.new(\$stderr, level: :warn)
  config.action_controller.allow_forgery_protection = false
end
Site.initialize!
User = Struct.new(:id)
ActionController::Base.class_eval do
  private def current_user = session[:user_id] && User.new(session[:user_id])
end
class SessionsController < ActionController::Base
  def create
    session[:user_id] = params[:user]
    render plain: "logged in"
  end
end
class ApiController < ActionController::Base
  def hello = render(plain: request.headers["X-Tokengate-User"].to_s)
end
require_relative "app/controllers/tokengate_controller"
Site.routes.draw do
  instance_eval(File.read(File.join(__dir__, "route.rb")))
  post "accounts/login", to: "sessions#create"
  get "api/hello", to: "api#hello"
end
Rack::Handler::WEBrick.run(Site, Host: "127.0.0.1", Port: $port, AccessLog: [], Logger: WEBrick::Log.new(\$stderr, WEBrick::Log::WARN))
RUBY
      (cd "$work/rails" && exec ruby site.rb > "$work/site.log" 2>&1) & pids+=($!) ;;
  esac
}

check() {  # framework user: the id the site's whoami answers for the login "42" (Django's is the user's pk)
  local framework="$1" user="$2" site_port gw_port http_port cfg status token body
  site_port="$(free_port)" gw_port="$(free_port)" http_port="$(free_port)"
  sed "s|http://127.0.0.1:8000|http://127.0.0.1:$site_port|g" "$work/tokengate.yaml" > "$work/etc/tokengate.yaml"
  cfg="$work/etc/tokengate.yaml"
  rm -f "$work/cutoffs.db" "$work/jar"
  run_site "$framework" "$site_port"
  export TOKENGATE_LISTEN="127.0.0.1:$gw_port,127.0.0.1:$http_port" TOKENGATE_ADMIN_ADDRESS=127.0.0.1:0 TOKENGATE_CUTOFFS_SQLITE="$work/cutoffs.db"
  "$tokengate" serve --config "$cfg" > "$work/gateway.log" 2>&1 & pids+=($!)
  local gateway=$!
  local c=(curl -s --max-time 10 --cacert "$work/etc/tls/cert.pem" --resolve "www.example.com:$gw_port:127.0.0.1" -b "$work/jar" -c "$work/jar")
  local base="https://www.example.com:$gw_port"
  for _ in $(seq 1 100); do
    if grep -q '"listening"' "$work/gateway.log" && curl -s -o /dev/null "http://127.0.0.1:$site_port/api/hello"; then break; fi
    sleep 0.1
  done
  status="$("${c[@]}" -o /dev/null -w '%{http_code}' "$base/api/hello")"
  [ "$status" = 401 ] && ok "$framework: /api/ without a token: 401" || bad "$framework: /api/ without a token: $status"
  status="$("${c[@]}" -o /dev/null -w '%{http_code} %{redirect_url}' "$base/token")"
  [[ "$status" =~ ^30[23]\ .*/accounts/login/ ]] && ok "$framework: the token page before logging in: $status" || bad "$framework: the token page before logging in: $status"
  body="$("${c[@]}" -d user=42 "$base/accounts/login/")"
  status="$("${c[@]}" -o /dev/null -w '%{http_code}' "$base/token")"
  token="$(awk '$6 == "auth_token" { print $7 }' "$work/jar" | tail -1)"
  if [ "$status" = 200 ] && [ -n "$token" ]; then ok "$framework: logged in ('$body'), the token page: 200 and the auth_token cookie"
  else bad "$framework: the token page after logging in: $status, cookie '${token:0:20}'"; sed 's/^/        /' "$work/site.log" | tail -5; grep whoami "$work/gateway.log" | tail -3 | sed 's/^/        /'; fi
  body="$(curl -s --max-time 10 --cacert "$work/etc/tls/cert.pem" --resolve "www.example.com:$gw_port:127.0.0.1" -H "Authorization: Bearer $token" "$base/api/hello")"
  [ "$body" = "$user" ] && ok "$framework: the token on /api/: the backend sees X-Tokengate-User $user" || bad "$framework: the token on /api/: '${body:0:80}'"
  local verified iat
  verified="$("$tokengate" token verify --keys "$work/etc/keys/public.jwks" --accept api -- "$token" || true)"
  iat="$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get("iat", 0))' "$verified" 2> /dev/null || echo 0)"
  [[ "$verified" == *"\"sub\":\"$user\",\"kind\":\"api\""* ]] && ok "$framework: token verify: $verified" || bad "$framework: token verify: $verified"
  # The user changes the password a second after the token was minted (a cutoff at iat + 1: tokens issued before).
  "$tokengate" revoke --config "$cfg" --user "$user" --at "$((iat + 1))" > "$work/revoke.log" 2>&1 || sed 's/^/        /' "$work/revoke.log"
  for _ in $(seq 1 30); do
    status="$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$work/etc/tls/cert.pem" --resolve "www.example.com:$gw_port:127.0.0.1" -H "Authorization: Bearer $token" "$base/api/hello")"
    [ "$status" = 401 ] && break; sleep 0.2
  done
  [ "$status" = 401 ] && ok "$framework: after tokengate revoke --user $user, the token: 401" || bad "$framework: after revoke, the token: $status"
  kill "${pids[@]}" 2> /dev/null || true; wait 2> /dev/null || true; pids=()
  unset TOKENGATE_LISTEN TOKENGATE_ADMIN_ADDRESS TOKENGATE_CUTOFFS_SQLITE
}

echo "== quick start (docs/quickstart.md) behind the gateway"
if /usr/bin/python3 -c 'import flask' 2> /dev/null; then check Flask 42; else skip "Flask: python3-flask is not installed"; fi
if /usr/bin/python3 -c 'import django' 2> /dev/null; then check Django 1; else skip "Django: python3-django is not installed"; fi
if [ -d /usr/share/nodejs/express ] && [ -d /usr/share/nodejs/cookie-parser ]; then check Express 42; else skip "Express: node-express or node-cookie-parser is not installed"; fi
if ruby -e 'require "action_controller/railtie"; require "rack/handler/webrick"' 2> /dev/null; then check Rails 42; else skip "Rails: ruby-railties or ruby-webrick is not installed"; fi
if [ "$failures" -eq 0 ]; then echo "test-quickstart: all checks passed"
else echo "test-quickstart: $failures check(s) failed"; exit 1; fi
