#!/usr/bin/env node
// Mints a tokengate api token with Node.js's own crypto module (no package needed; Node.js 16 or newer).
//
// Usage: node mint.mjs SECRET_FILE USER_ID [KID]
// SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

const [secretFile, userId, kid] = process.argv.slice(2);
let secret = readFileSync(secretFile);
if (secret.at(-1) === 0x0a) secret = secret.subarray(0, -1);

// base64url without padding, as JWS requires.
const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
const header = kid ? { alg: "HS256", typ: "JWT", kid } : { alg: "HS256", typ: "JWT" };
const claims = { sub: userId, iat: Math.floor(Date.now() / 1000), api_only: true };
const signingInput = `${part(header)}.${part(claims)}`;
const signature = createHmac("sha256", secret).update(signingInput).digest("base64url");
console.log(`${signingInput}.${signature}`);
