#!/usr/bin/env python3
"""A login service for the auth benchmark (scripts/bench/auth.sh), in mosquitto-go-auth's HTTP
convention as RingMQ's `[auth.http]` speaks it: a login is a POST of JSON
{"clientid", "username", "password", "peer"}; 200 for the one configured user and password,
403 for anything else (a topic check, POSTed the same way, gets 200). GET /stats answers the
logins allowed and refused so far, as JSON.

HTTP/1.1 with keep-alive (RingMQ reuses its connections), one thread per connection
(http.server.ThreadingHTTPServer), no request logging. Bounded: it exits by itself after
--lifetime seconds.

    http_auth_server.py --port PORT --username USER --password PASSWORD [--lifetime S]
"""

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--lifetime", type=float, default=3600.0)
    args = parser.parse_args()
    counts = {"allowed": 0, "refused": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            if self.path.endswith("/login"):
                ok = body.get("username") == args.username and body.get("password") == args.password
            else:
                ok = True
            with lock:
                counts["allowed" if ok else "refused"] += 1
            self.send_response(200 if ok else 403)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            with lock:
                body = json.dumps(counts).encode()
            self.send_response(200 if self.path == "/stats" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    class Server(ThreadingHTTPServer):
        # The default backlog (5) drops the SYNs of a burst of new keep-alive connections.
        request_queue_size = 128
        daemon_threads = True

    server = Server(("127.0.0.1", args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        print(f"http_auth_server {os.getpid()}: {counts}", flush=True)


if __name__ == "__main__":
    main()
