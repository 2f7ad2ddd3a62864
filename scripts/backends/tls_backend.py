#!/usr/bin/env python3
"""A backend that accepts the gateway only: Python's own http.server behind Python's ssl module (OpenSSL) with
CERT_REQUIRED, so a connection without a client certificate signed by --client-ca fails its TLS handshake, and an
optional shared secret header compared in constant time. Every GET is answered with what the backend learned:

    {"client": "<subject CN of the client certificate>", "secret_fields": <copies of the secret field>,
     "secret_ok": <exactly one copy, equal to the file's secret>, "user": "<X-Tokengate-User or null>"}

A request whose secret does not match is answered 403, as a real backend would. Used by the gateway's upstream
TLS tests and as the example in docs/operations.md.

    tls_backend.py --port 8443 --cert server.pem --key server.key --client-ca gateway-ca.pem \
        [--secret-header X-Tokengate-Secret --secret-file backend.secret]
"""
import argparse
import hmac
import http.server
import json
import socketserver
import ssl


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca", required=True)
    parser.add_argument("--secret-header")
    parser.add_argument("--secret-file")
    arguments = parser.parse_args()
    secret = None
    if arguments.secret_file:
        with open(arguments.secret_file, "rb") as file:
            secret = file.read().rstrip(b"\r\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            peer = self.connection.getpeercert() or {}
            subject = dict(item for part in peer.get("subject", ()) for item in part)
            copies = self.headers.get_all(arguments.secret_header) or [] if arguments.secret_header else []
            secret_ok = secret is not None and len(copies) == 1 and hmac.compare_digest(copies[0].encode(), secret)
            status = 200 if secret is None or secret_ok else 403
            body = json.dumps({
                "client": subject.get("commonName"),
                "secret_fields": len(copies),
                "secret_ok": secret_ok,
                "user": self.headers.get("X-Tokengate-User"),
            }).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(arguments.cert, arguments.key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(arguments.client_ca)
    class Server(http.server.ThreadingHTTPServer):
        def server_bind(self):
            # Without HTTPServer's reverse DNS look-up of the address (getfqdn), slow on a host without a resolver.
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = self.server_address[:2]

    server = Server(("127.0.0.1", arguments.port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
