"""A real S3 server on loopback for tests and benches: moto_server on a free
port, plus a fault-injecting HTTP proxy in front of it."""

import http.client
import os
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """moto_server in a child process; env adds to its environment (e.g.
    INITIAL_NO_AUTH_ACTION_COUNT). It binds port 0 and we read the port it
    got from its startup line, so no other process can take a port we picked
    between choosing it and moto binding it (and we never talk to another
    server by mistake)."""

    def __init__(self, env=None):
        e = dict(os.environ, **(env or {}))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from moto.server import main; main()",
             "-H", "127.0.0.1", "-p", "0"],
            env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found = threading.Event()
        self.port = None

        def read_log():
            for line in self.proc.stderr:  # werkzeug logs every request here: keep draining
                m = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        threading.Thread(target=read_log, daemon=True).start()
        if not found.wait(60) or self.port is None:
            self.close()
            raise RuntimeError("moto_server did not start within 60 s")
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError("moto_server did not accept connections within 60 s")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class FaultProxy:
    """Forwards HTTP/1.1 requests to upstream. faults(method, target, n)
    decides the fate of the n-th (0-based) time this exact request line (with
    its Range header) is seen: None passes it, "500"/"503" answers that
    status, "drop" sends the headers and half the body then closes, "stall"
    sends the headers and then nothing for stall_s seconds."""

    def __init__(self, upstream_port, faults, stall_s=5.0):
        self.faults = faults
        self.stall_s = stall_s
        self.seen = {}
        self.injected = {"500": 0, "503": 0, "drop": 0, "stall": 0}
        self.served_bytes = 0  # response bodies passed through whole
        # What the server was asked and sent: every request, and the body
        # bytes of object GETs (not listings) as the client received them.
        self.requests = 0
        self.object_gets = 0
        self.object_bytes = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                try:
                    while proxy._one(self.rfile, self.wfile, up):
                        pass
                except (OSError, ValueError):
                    pass
                finally:
                    up.close()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _one(self, rfile, wfile, up):
        line = rfile.readline()
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers = {}
        while True:
            h = rfile.readline().decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            k, v = h.split(":", 1)
            headers[k.strip()] = v.strip()
        length = int(headers.get("Content-Length", "0") or 0)
        body = rfile.read(length) if length else None
        ident = (method, target, headers.get("Range", headers.get("range", "")))
        with self.lock:
            n = self.seen.get(ident, 0)
            self.seen[ident] = n + 1
            self.requests += 1
        fault = self.faults(method, target, n)
        if fault in ("500", "503"):
            with self.lock:
                self.injected[fault] += 1
            code = "SlowDown" if fault == "503" else "InternalError"
            doc = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
            wfile.write(f"HTTP/1.1 {fault} Injected\r\nContent-Length: {len(doc)}\r\n"
                        f"Content-Type: application/xml\r\n\r\n".encode() + doc)
            wfile.flush()
            return True
        up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            up.putheader(k, v)
        up.endheaders(body)
        resp = up.getresponse()
        data = resp.read()
        head = f"HTTP/1.1 {resp.status} {resp.reason}\r\n"
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                head += f"{k}: {v}\r\n"
        head += f"Content-Length: {len(data)}\r\n\r\n"
        if fault == "drop" and len(data) > 1:
            with self.lock:
                self.injected["drop"] += 1
            wfile.write(head.encode("latin-1") + data[: len(data) // 2])
            wfile.flush()
            return False  # closes the connection mid-body
        if fault == "stall":
            with self.lock:
                self.injected["stall"] += 1
            wfile.write(head.encode("latin-1"))
            wfile.flush()
            time.sleep(self.stall_s)
            return False
        if method == "GET" and resp.status in (200, 206) and "list-type" not in target:
            with self.lock:
                self.object_gets += 1
                self.object_bytes += len(data)
        wfile.write(head.encode("latin-1") + data)
        wfile.flush()
        with self.lock:
            self.served_bytes += len(data)  # what the origin served, bodies only
        return True

    def counts(self):
        """(requests, object GETs, object body bytes) so far."""
        with self.lock:
            return self.requests, self.object_gets, self.object_bytes

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def upload_tree(s3, bucket, root, prefix):
    """Uploads every file under root to bucket as prefix + relative path."""
    keys = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            key = prefix + os.path.relpath(path, root).replace(os.sep, "/")
            s3.upload_file(path, bucket, key)
            keys.append(key)
    return sorted(keys)
