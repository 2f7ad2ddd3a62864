# Settings of the OpenID provider the gateway tests run: django-oauth-toolkit with OpenID Connect on, its
# state (SQLite, signing keys) in TOKENGATE_OP_DIR. serve.py sets the environment before Django reads this.
import os
from pathlib import Path

STATE = Path(os.environ["TOKENGATE_OP_DIR"])
ISSUER = os.environ["TOKENGATE_OP_ISSUER"]

SECRET_KEY = (STATE / "django-secret").read_text()
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    # Sets Content-Length: without it wsgiref ends each body by closing the connection, which a TLS client
    # cannot tell from a truncation (the gateway refuses such a body).
    "django.middleware.common.CommonMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tokengate_op.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE / "op.sqlite3"}}
LOGIN_URL = "/accounts/login/"
# The provider's own TLS: cookies marked Secure, as in production.
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
CSRF_TRUSTED_ORIGINS = [ISSUER.split("/o")[0]]

# The signing keys: keys/active.pem signs; keys/inactive-*.pem are still published in the JWK Set (a
# rotation moves the old active key there).
keys = STATE / "keys"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": (keys / "active.pem").read_text(),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [p.read_text() for p in sorted(keys.glob("inactive-*.pem"))],
    "OIDC_JWKS_MAX_AGE_SECONDS": int(os.environ.get("TOKENGATE_OP_JWKS_MAX_AGE", "3600")),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect"},
}
