#!/usr/bin/env python3
"""Mints a tokengate api token with PyJWT (Debian 12: apt-get install python3-jwt).

Usage: mint.py SECRET_FILE USER_ID [KID]
SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).
"""
import sys
import time

import jwt  # PyJWT

secret_file, user_id = sys.argv[1], sys.argv[2]
kid = sys.argv[3] if len(sys.argv) > 3 else None
with open(secret_file, "rb") as f:
    secret = f.read().rstrip(b"\n")  # read once at start-up in a real site, not per request

claims = {"sub": user_id, "iat": int(time.time()), "api_only": True}
headers = {"kid": kid} if kid else None
print(jwt.encode(claims, secret, algorithm="HS256", headers=headers))
