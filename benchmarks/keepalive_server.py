"""moto's AWS behind a server that keeps connections alive (HTTP/1.1), as AWS's endpoints
do: moto's own server (werkzeug's) closes every connection after its answer, so a client
measured against it pays a new connection (and with TLS, a handshake) on every call.

    python benchmarks/keepalive_server.py PORT [CERT KEY]
"""

from __future__ import annotations

import io
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

APP = DomainDispatcherApplication(create_backend_app)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries its Content-Length

    def log_message(self, format: str, *args: Any) -> None:  # (quiet)
        pass

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        environ = {
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "localhost",
            "SERVER_PORT": str(self.server.server_address[1]),
            "SERVER_PROTOCOL": self.protocol_version,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "https" if isinstance(self.connection, ssl.SSLSocket) else "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "REMOTE_ADDR": self.client_address[0],
        }
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = value
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda data: None

        answer = b"".join(APP(environ, start_response))
        status, headers = started
        self.send_response(int(status.split()[0]), status.partition(" ")[2])
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


def main(argv: list[str]) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(argv[0])), Handler)
    if len(argv) == 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(argv[1], argv[2])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
