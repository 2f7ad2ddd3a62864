"""A minimal Flask application (PyPI: Flask, Flask-Login) that logs users in with Flask's default signed-cookie
session, for tokengate's session-cookie tests. One JSON request on stdin, one JSON document on stdout:

    {"secret": "...", "ops": [{"op": "login", "user": "42", "login_at": 1700000000, "api": false},
                              {"op": "read", "cookie": "..."}]}

login answers {"cookie": <the "session" cookie's value>}; read answers {"user": <the user Flask-Login loads from
the cookie, or null>}.
"""

import json
import sys

import flask
import flask_login

request_document = json.load(sys.stdin)

app = flask.Flask(__name__)
app.secret_key = request_document["secret"]
login_manager = flask_login.LoginManager(app)


class User(flask_login.UserMixin):
    def __init__(self, user_id):
        self.id = user_id


@login_manager.user_loader
def load_user(user_id):
    return User(user_id)


@app.post("/login")
def login():
    flask_login.login_user(User(flask.request.form["user"]))
    # What the site adds: the login time, which Flask's own signing timestamp is not (it is renewed on every save).
    flask.session["login_at"] = int(flask.request.form["login_at"])
    if flask.request.form.get("api") == "true":
        flask.session["api_only"] = True
    return "ok"


@app.get("/whoami")
def whoami():
    user = flask_login.current_user
    return user.id if user.is_authenticated else ""


client = app.test_client()
results = []
for op in request_document["ops"]:
    if op["op"] == "login":
        client.delete_cookie("session")
        response = client.post(
            "/login", data={"user": op["user"], "login_at": str(op["login_at"]), "api": str(op.get("api", False)).lower()}
        )
        cookie = client.get_cookie("session")
        results.append({"cookie": cookie.value if cookie else None})
    elif op["op"] == "read":
        reader = app.test_client()
        reader.set_cookie("session", op["cookie"])
        body = reader.get("/whoami").get_data(as_text=True)
        results.append({"user": body or None})
    else:
        raise SystemExit(f"unknown op {op['op']}")
print(json.dumps({"flask": __import__("importlib.metadata").metadata.version("flask"), "results": results}))
