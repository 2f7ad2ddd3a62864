"""Gets an ID token from the test provider the way an app does: sign in as alice, the authorization code
request with PKCE, then the code at the token endpoint. Prints the ID token (a JWT the provider signed).

    mint.py ISSUER CA_FILE
"""
import base64
import hashlib
import http.cookiejar
import json
import re
import secrets
import ssl
import sys
import urllib.parse
import urllib.request

issuer, ca_file = sys.argv[1], sys.argv[2]
origin = issuer.rsplit("/o", 1)[0]
context = ssl.create_default_context(cafile=ca_file)
jar = http.cookiejar.CookieJar()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


opener = urllib.request.build_opener(
    urllib.request.HTTPSHandler(context=context), urllib.request.HTTPCookieProcessor(jar), NoRedirect()
)


def call(url, data=None, headers=None):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(request, timeout=20) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


status, _, page = call(origin + "/accounts/login/")
csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
form = urllib.parse.urlencode({"username": "alice", "password": "alice-password", "csrfmiddlewaretoken": csrf})
status, _, _ = call(origin + "/accounts/login/", form.encode(), {"Referer": origin + "/accounts/login/"})
assert status == 302, f"login answered {status}"

verifier = secrets.token_urlsafe(48)
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
query = urllib.parse.urlencode({
    "response_type": "code", "client_id": "tokengate-app", "redirect_uri": "http://127.0.0.1/callback",
    "scope": "openid", "code_challenge": challenge, "code_challenge_method": "S256", "state": "s",
    "nonce": secrets.token_urlsafe(8),
})
status, headers, body = call(issuer + "/authorize/?" + query)
assert status == 302, f"authorize answered {status}: {body[:300]}"
code = urllib.parse.parse_qs(urllib.parse.urlparse(headers["Location"]).query)["code"][0]
form = urllib.parse.urlencode({
    "grant_type": "authorization_code", "code": code, "redirect_uri": "http://127.0.0.1/callback",
    "client_id": "tokengate-app", "code_verifier": verifier,
})
status, _, body = call(issuer + "/token/", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"})
assert status == 200, f"token answered {status}: {body[:300]}"
print(json.loads(body)["id_token"])
