"""A minimal Django project (PyPI: Django) that logs users in with the signed-cookie session engine, for
tokengate's session-cookie tests. One JSON request on stdin, one JSON document on stdout:

    {"secret": "...", "ops": [{"op": "login", "user": "42", "login_at": 1700000000, "api": false},
                              {"op": "read", "cookie": "..."}]}

login answers {"cookie": <the "sessionid" cookie's value>, "auth_hash": <the user's session auth hash, which a
site would hand the token page in its whoami answer>}; read answers {"user": <the id django.contrib.auth
authenticates from the cookie, password-hash check included, or null>}.
"""

import json
import sys

import django
from django.conf import settings

request_document = json.load(sys.stdin)

settings.configure(
    SECRET_KEY=request_document["secret"],
    DEBUG=False,
    ALLOWED_HOSTS=["testserver"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions"],
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    SESSION_ENGINE="django.contrib.sessions.backends.signed_cookies",
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],  # fast; the hash only feeds auth_hash
    USE_TZ=True,
)
django.setup()

from django.contrib.auth import login as django_login  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


@csrf_exempt
def login_view(request):
    user = User.objects.get(pk=int(request.POST["user"]))
    django_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    # What the site adds: the login time, which the signer's timestamp is not (it is renewed on every save).
    request.session["login_at"] = int(request.POST["login_at"])
    if request.POST.get("api") == "true":
        request.session["api_only"] = True
    return HttpResponse("ok")


def whoami_view(request):
    return HttpResponse(str(request.user.pk) if request.user.is_authenticated else "")


urlpatterns = [path("login", login_view), path("whoami", whoami_view)]

call_command("migrate", verbosity=0)


def ensure_user(user_id):
    """The same user, with the same password hash, in every run (each run has a new in-memory database): the
    session auth hash Django checks on every request derives from the password hash, so it must not change."""
    user, _ = User.objects.get_or_create(pk=int(user_id), defaults={"username": f"user{user_id}"})
    user.password = make_password("correct horse battery staple", salt="tokengatetestsalt")
    user.save()
    return user


for user_id in request_document.get("users", ["42", "7", "9"]):
    ensure_user(user_id)
results = []
for op in request_document["ops"]:
    if op["op"] == "login":
        user = ensure_user(op["user"])
        client = Client()
        client.post("/login", {"user": op["user"], "login_at": str(op["login_at"]), "api": str(op.get("api", False)).lower()})
        results.append({"cookie": client.cookies["sessionid"].value, "auth_hash": user.get_session_auth_hash()})
    elif op["op"] == "read":
        client = Client()
        client.cookies["sessionid"] = op["cookie"]
        body = client.get("/whoami").content.decode()
        results.append({"user": body or None})
    else:
        raise SystemExit(f"unknown op {op['op']}")
print(json.dumps({"django": django.get_version(), "results": results}))
