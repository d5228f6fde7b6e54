#!/usr/bin/env python3
"""A fake Anthropic, OpenAI and Google Gemini API server that answers from fixture files.

    fake_upstream.py --host 127.0.0.2 --port 0 --fixtures DIR --log FILE
                     [--chunk-size 37] [--chunk-delay 0.002] [--tls-cert PEM --tls-key PEM]

Prints `listening HOST:PORT` on stdout once it accepts connections. HTTP/1.1 with keep-alive;
HTTPS with --tls-cert and --tls-key (the certificate chain and its key, PEM files).

Routes (POST): /v1/messages (Anthropic), /v1/chat/completions and /v1/responses (OpenAI),
/v1beta/models/MODEL:generateContent and /v1beta/models/MODEL:streamGenerateContent (Google; /v1/
too). The answer is chosen by request headers:

  x-fake-scenario: NAME      serve DIR/NAME.json (buffered, application/json) when the request's
                             JSON has no "stream": true, DIR/NAME.sse (text/event-stream, chunked,
                             in --chunk-size byte pieces flushed --chunk-delay seconds apart) when
                             it has. A request whose stream flag has no fixture of that kind: 400.
                             Google says it in the path instead: :generateContent is served
                             DIR/NAME.json, :streamGenerateContent?alt=sse DIR/NAME.sse, and
                             :streamGenerateContent without alt=sse DIR/NAME.jsonarray (a streamed
                             JSON array of chunks: application/json, chunked in pieces the same way).
  x-fake-encoding: gzip|br|zstd|deflate
                             compress the whole body and say so in Content-Encoding (a streamed
                             body is compressed whole, then sent chunked in pieces the same way).
  x-fake-status: CODE        answer CODE with the provider's error JSON instead (no scenario
                             needed).

Errors (unknown route 404, bad scenario 400, x-fake-status) are JSON in the shape of the route's
provider: Anthropic's {"type":"error","error":{"type","message"},"request_id"}, OpenAI's
{"error":{"message","type","param","code"}} or Google's {"error":{"code","message","status"}}
(any other path under /v1beta/ or /v1alpha/ gets Google's 404, the rest OpenAI's).

Every request is appended to --log as one JSON line, flushed:
  {"method": ..., "path": ..., "headers": {lowercased name: value}, "body": parsed JSON or string}
(a request body in Content-Encoding gzip/br/zstd/deflate is decoded first), plus "tls": the
protocol version when it came over TLS. A TLS handshake that fails is logged as
  {"tls_error": "..."}
"""
import argparse
import gzip
import json
import os
import re
import ssl
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import brotli
import zstandard

ROUTES = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai",
    "/v1/responses": "openai",
}
# Google's Gemini API names the model and the method in the path.
GOOGLE_ROUTE = re.compile(r"^/v1(?:beta)?/models/[^/:]+:(generateContent|streamGenerateContent)$")

ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
OPENAI_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}
GOOGLE_ERRORS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# Reason phrases http.server does not know.
REASONS = {529: "Overloaded"}
DEFAULT_MESSAGES = {
    400: "Bad request",
    401: "Invalid API key",
    403: "Forbidden",
    404: "Not found",
    429: "Rate limited",
    500: "Internal server error",
    503: "Service unavailable",
    529: "Overloaded",
}


def compress(data, encoding):
    if encoding == "gzip":
        return gzip.compress(data, mtime=0)
    if encoding == "deflate":  # HTTP's deflate is the zlib format (RFC 9110 8.4.1.2)
        return zlib.compress(data)
    if encoding == "br":
        return brotli.compress(data)
    if encoding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(encoding)


def decompress(data, encoding):
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(data)
    if encoding == "deflate":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return zlib.decompress(data, -zlib.MAX_WBITS)
    if encoding == "br":
        return brotli.decompress(data)
    if encoding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def log(entry):
    with Handler.log_lock:
        Handler.log_file.write(json.dumps(entry, ensure_ascii=False) + "\n")
        Handler.log_file.flush()


class TLSServer(ThreadingHTTPServer):
    """HTTPS: each connection's handshake runs in its own thread, so a client that stalls or
    refuses the certificate holds up no other."""

    tls = None  # an ssl.SSLContext, set by main()

    def finish_request(self, request, client_address):
        try:
            request = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            # A client refusing our certificate ends here: logged, no request read.
            log({"tls_error": str(e)})
            return
        try:
            super().finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-upstream/1"

    # set on the class by main()
    fixtures = "."
    log_file = None
    log_lock = threading.Lock()
    chunk_size = 37
    chunk_delay = 0.002

    def log_message(self, format, *args):  # keep stderr quiet: the JSON log says it all
        pass

    # ------------------------------------------------------------------ request side

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def record(self, raw):
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        data = raw
        try:
            for enc in reversed([e.strip().lower() for e in headers.get("content-encoding", "").split(",") if e.strip()]):
                data = decompress(data, enc)
        except Exception:
            data = raw
        text = data.decode("utf-8", errors="replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        entry = {"method": self.command, "path": self.path, "headers": headers, "body": body}
        if isinstance(self.connection, ssl.SSLSocket):
            entry["tls"] = self.connection.version()
        log(entry)
        return body

    # ------------------------------------------------------------------ answers

    def send_error_json(self, provider, status, message=None, err_type=None):
        message = message or DEFAULT_MESSAGES.get(status, f"Error {status}")
        request_id = "req_011CfakeUpstream" + uuid.uuid4().hex[:10]
        content_type = "application/json"
        if provider == "anthropic":
            err_type = err_type or ANTHROPIC_ERRORS.get(status, "api_error")
            body = {"type": "error", "error": {"type": err_type, "message": message}, "request_id": request_id}
            extra = {"request-id": request_id}
        elif provider == "google":
            body = {"error": {"code": status, "message": message, "status": GOOGLE_ERRORS.get(status, "UNKNOWN")}}
            extra = {}
            content_type = "application/json; charset=UTF-8"
        else:
            otype, code = OPENAI_ERRORS.get(status, ("server_error", None))
            if message.startswith("Invalid URL"):
                code = None
            body = {"error": {"message": message, "type": err_type or otype, "param": None, "code": code}}
            extra = {"x-request-id": request_id}
        data = json.dumps(body, indent=None if provider == "anthropic" else 2).encode()
        self.send_response(status, REASONS.get(status))
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_pieces(self, data):
        """Writes data as chunked transfer coding, chunk_size bytes a chunk, each flushed."""
        size = max(1, self.chunk_size)
        for i in range(0, len(data), size):
            piece = data[i : i + size]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            if self.chunk_delay > 0:
                time.sleep(self.chunk_delay)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self):
        try:
            self.answer()
        except (BrokenPipeError, ConnectionResetError):
            # The client (or a proxy in between) hung up mid-answer: a test may do that on purpose.
            self.close_connection = True

    def route(self):
        """The provider of the request's path (None: no such route) and Google's method."""
        path = self.path.split("?", 1)[0]
        if path in ROUTES:
            return ROUTES[path], None
        m = GOOGLE_ROUTE.match(path)
        if m:
            return "google", m.group(1)
        return None, None

    def fixture(self, provider, method, body, scenario):
        """(the fixture file, its kind: "json", "sse" or "jsonarray"), or (None, why not)."""
        if provider == "google":
            query = parse_qs(self.path.partition("?")[2])
            if method == "generateContent":
                want, asked = ".json", ":generateContent"
            elif query.get("alt") == ["sse"]:
                want, asked = ".sse", ":streamGenerateContent?alt=sse"
            else:
                want, asked = ".jsonarray", ":streamGenerateContent without alt=sse"
            path = os.path.join(self.fixtures, scenario + want)
            if os.path.isfile(path):
                return path, want[1:]
            if any(os.path.isfile(os.path.join(self.fixtures, scenario + k)) for k in (".json", ".sse", ".jsonarray")):
                return None, f"fake upstream: scenario {scenario!r} has no {want} fixture, which {asked} wants"
            return None, f"fake upstream: no fixture {scenario}.json, .sse or .jsonarray in {self.fixtures}"
        stream = isinstance(body, dict) and body.get("stream") is True
        want, other = (".sse", ".json") if stream else (".json", ".sse")
        path = os.path.join(self.fixtures, scenario + want)
        if os.path.isfile(path):
            return path, want[1:]
        if os.path.isfile(os.path.join(self.fixtures, scenario + other)):
            return None, (f"fake upstream: scenario {scenario!r} has only a {other} fixture but the request "
                          f"{'asked for' if stream else 'did not ask for'} \"stream\": true")
        return None, f"fake upstream: no fixture {scenario}.json or {scenario}.sse in {self.fixtures}"

    def answer(self):
        raw = self.read_body()
        body = self.record(raw)
        provider, method = self.route()
        if provider is None:
            path = self.path.split("?", 1)[0]
            return self.send_error_json(self.error_shape(path), 404, f"Invalid URL (POST {path})")

        status = self.headers.get("x-fake-status")
        if status:
            try:
                code = int(status)
            except ValueError:
                return self.send_error_json(provider, 400, f"x-fake-status is not a number: {status!r}")
            return self.send_error_json(provider, code)

        scenario = self.headers.get("x-fake-scenario")
        if not scenario or "/" in scenario or scenario.startswith("."):
            return self.send_error_json(provider, 400, f"missing or bad x-fake-scenario header: {scenario!r}")
        fixture, kind = self.fixture(provider, method, body, scenario)
        if fixture is None:
            return self.send_error_json(provider, 400, kind)
        with open(fixture, "rb") as f:
            data = f.read()

        encoding = self.headers.get("x-fake-encoding")
        if encoding:
            try:
                data = compress(data, encoding)
            except ValueError:
                return self.send_error_json(provider, 400, f"unknown x-fake-encoding {encoding!r}")

        self.send_response(200)
        if provider != "google":  # Google's API sends no request id
            request_id = "req_011CfakeUpstream" + uuid.uuid4().hex[:10]
            self.send_header("request-id" if provider == "anthropic" else "x-request-id", request_id)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        if kind == "json":
            self.send_header("Content-Type", "application/json; charset=UTF-8" if provider == "google"
                             else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return
        if kind == "sse":
            self.send_header("Content-Type", "text/event-stream" if provider == "google"
                             else "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
        else:  # Google's streamed JSON array
            self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.send_pieces(data)

    @staticmethod
    def error_shape(path):
        """Whose error JSON an unknown path gets."""
        return "google" if path.startswith(("/v1beta/", "/v1alpha/")) else "openai"

    def do_other(self):
        raw = self.read_body()
        self.record(raw)
        path = self.path.split("?", 1)[0]
        provider = self.route()[0] or self.error_shape(path)
        self.send_error_json(provider, 404, f"Invalid URL ({self.command} {path})")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_other


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.2")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--fixtures", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
    p.add_argument("--log", required=True)
    p.add_argument("--chunk-size", type=int, default=37, help="bytes per chunk of a streamed body")
    p.add_argument("--chunk-delay", type=float, default=0.002, help="seconds between chunks")
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    p.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    args = p.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")

    Handler.fixtures = args.fixtures
    Handler.log_file = open(args.log, "a", encoding="utf-8")
    Handler.chunk_size = args.chunk_size
    Handler.chunk_delay = args.chunk_delay
    if args.tls_cert:
        TLSServer.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLSServer.tls.load_cert_chain(args.tls_cert, args.tls_key)
        server = TLSServer((args.host, args.port), Handler)
    else:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"listening {host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
