// A minimal Express application (Debian: node-express, node-cookies, node-keygrip) that logs users in with a
// cookie-session style session, for tokengate's session-cookie tests. cookie-session itself is not packaged by
// Debian; what it does is two lines around the packaged modules it is built on, written out here: the session is
// base64 of its JSON, set and read with `cookies` and `signed: true`, which signs `NAME=VALUE` with keygrip into
// `NAME.sig`. One JSON request on stdin, one JSON document on stdout:
//
//   {"secret": "...", "ops": [{"op": "login", "user": "42", "login_at": 1700000000, "api": false},
//                             {"op": "read", "cookie": "...", "sig": "..."}]}
//
// login answers {"cookie": <"session" value>, "sig": <"session.sig" value>}; read answers {"user": <the user the
// application sees, or null>}. The application listens on 127.0.0.1 only, on a port the system picks.
'use strict';
const http = require('http');
const express = require('express');
const Cookies = require('cookies');
const Keygrip = require('keygrip');

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const keys = new Keygrip([input.secret]);

// cookie-session's `encode` and `decode`.
const encode = (body) => Buffer.from(JSON.stringify(body)).toString('base64');
const decode = (text) => JSON.parse(Buffer.from(text, 'base64').toString('utf8'));

const app = express();
app.use(Cookies.express(keys));
app.use(express.urlencoded({ extended: false }));
app.post('/login', (req, res) => {
  const session = { passport: { user: req.body.user }, login_at: Number(req.body.login_at) };
  if (req.body.api === 'true') session.api_only = true;
  req.cookies.set('session', encode(session), { signed: true, httpOnly: true });
  res.send('ok');
});
app.get('/whoami', (req, res) => {
  const value = req.cookies.get('session', { signed: true });
  let user = '';
  if (value) {
    try { user = String(decode(value).passport.user); } catch (e) { user = ''; }
  }
  res.send(user);
});

function request(port, method, path, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let data = '';
      res.on('data', (chunk) => { data += chunk; });
      res.on('end', () => resolve({ headers: res.headers, body: data }));
    });
    req.on('error', reject);
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
    if (body) req.write(body);
    req.end();
  });
}

const server = app.listen(0, '127.0.0.1', async () => {
  const port = server.address().port;
  const results = [];
  try {
    for (const op of input.ops) {
      if (op.op === 'login') {
        const form = new URLSearchParams({ user: op.user, login_at: String(op.login_at), api: String(!!op.api) });
        const response = await request(port, 'POST', '/login',
          { 'content-type': 'application/x-www-form-urlencoded' }, form.toString());
        const values = {};
        for (const line of response.headers['set-cookie'] || []) {
          const pair = line.split(';')[0];
          const at = pair.indexOf('=');
          values[pair.slice(0, at)] = pair.slice(at + 1);
        }
        results.push({ cookie: values['session'], sig: values['session.sig'] });
      } else if (op.op === 'read') {
        const response = await request(port, 'GET', '/whoami',
          { cookie: `session=${op.cookie}; session.sig=${op.sig}` });
        results.push({ user: response.body || null });
      } else {
        throw new Error(`unknown op ${op.op}`);
      }
    }
    process.stdout.write(JSON.stringify({ express: require('express/package.json').version, results }) + '\n');
  } catch (error) {
    process.stderr.write(String(error) + '\n');
    process.exitCode = 1;
  }
  server.close();
});
