"""An OpenTelemetry collector stand-in for the OTLP export tests.

It serves OTLP logs over gRPC (grpcio) or over HTTP (protobuf or JSON bodies, gzip or not)
and decodes every request with the official OpenTelemetry protos (opentelemetry-proto on
PyPI), strictly: a field the protos do not know fails the request. Each request it takes
is one JSON line in --log: its metadata (headers) and the request in OTLP's JSON mapping;
each refusal is a line too.

    collector.py --grpc|--http --host H --port P --log FILE [--tls-cert C --tls-key K]
                 [--unavailable N]

--unavailable N answers the first N requests with UNAVAILABLE (gRPC) or 503 (HTTP), as a
collector does while it is overloaded or restarting. Prints `listening HOST:PORT` once ready.
"""

import argparse
import gzip
import http.server
import json
import ssl
import sys
import threading
from concurrent import futures

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc


class Log:
    """The accepted requests, one JSON line each; and the refusals still to give."""

    def __init__(self, path, unavailable):
        self.path = path
        self.unavailable = unavailable
        self.lock = threading.Lock()

    def refuse_this_one(self):
        """Whether to refuse this request; a refusal is a `{"refused": true}` line."""
        with self.lock:
            if self.unavailable <= 0:
                return False
            self.unavailable -= 1
        self.write({"refused": True})
        return True

    def accepted(self, transport, metadata, request):
        self.write({
            "transport": transport,
            "metadata": metadata,
            "message_bytes": request.ByteSize(),
            "request": json_format.MessageToDict(request),
        })

    def write(self, entry):
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, log):
        self.log = log

    def Export(self, request, context):
        if self.log.refuse_this_one():
            context.abort(grpc.StatusCode.UNAVAILABLE, "the stand-in is unavailable for a while")
        metadata = {key: value for key, value in context.invocation_metadata()}
        self.log.accepted("grpc", metadata, request)
        return logs_service_pb2.ExportLogsServiceResponse()


def http_handler(log):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body=b"", content_type="application/x-protobuf", extra=()):
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path != "/v1/logs":
                return self.answer(404, b"")
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            content_type = self.headers.get("content-type", "")
            request = logs_service_pb2.ExportLogsServiceRequest()
            try:
                if content_type == "application/x-protobuf":
                    request.ParseFromString(body)
                elif content_type == "application/json":
                    json_format.Parse(body, request)
                else:
                    return self.answer(415, b"")
            except Exception as err:  # noqa: BLE001 - the test reads the reason
                print(f"collector: a bad request: {err}", file=sys.stderr, flush=True)
                return self.answer(400, json.dumps({"code": 3, "message": str(err)}).encode(),
                                   "application/json")
            if log.refuse_this_one():
                return self.answer(503, b"", extra=[("retry-after", "1")])
            log.accepted(content_type, {k.lower(): v for k, v in self.headers.items()}, request)
            response = logs_service_pb2.ExportLogsServiceResponse()
            if content_type == "application/json":
                self.answer(200, json_format.MessageToJson(response).encode(), "application/json")
            else:
                self.answer(200, response.SerializeToString())

    return Handler


def main():
    parser = argparse.ArgumentParser()
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--grpc", action="store_true")
    kind.add_argument("--http", action="store_true")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--unavailable", type=int, default=0)
    args = parser.parse_args()
    log = Log(args.log, args.unavailable)

    if args.grpc:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(LogsService(log), server)
        address = f"{args.host}:{args.port}"
        if args.tls_cert:
            with open(args.tls_key, "rb") as key, open(args.tls_cert, "rb") as cert:
                credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
        server.start()
        print(f"listening {args.host}:{port}", flush=True)
        server.wait_for_termination()
    else:
        server = http.server.ThreadingHTTPServer((args.host, args.port), http_handler(log))
        if args.tls_cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(args.tls_cert, args.tls_key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        print(f"listening {args.host}:{server.server_address[1]}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
