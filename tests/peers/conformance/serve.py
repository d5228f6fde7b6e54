"""Runs the vendored everything server (everything-server/, unchanged) on HOST:PORT.

    .venv/bin/python serve.py HOST PORT

Upstream's own entry point (`python -m mcp_everything_server --port N`) always binds
127.0.0.1; the end-to-end test picks the address. The server runs as upstream runs it
(streamable HTTP on /mcp, its event store, a 100 ms SSE retry interval), with the SDK's DNS
rebinding protection allowing exactly the host it serves on, which the conformance suite's
dns-rebinding-protection scenario checks. Prints `listening HOST:PORT` just before it binds.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "everything-server"))

from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402
from mcp_everything_server import server  # noqa: E402


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    named = f"[{host}]" if ":" in host else host
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{named}:*", "localhost:*"],
        allowed_origins=[f"http://{named}:*", "http://localhost:*"],
    )
    print(f"listening {named}:{port}", flush=True)
    server.mcp.run(
        transport="streamable-http",
        host=host,
        port=port,
        event_store=server.event_store,
        retry_interval=100,
        transport_security=security,
    )


if __name__ == "__main__":
    main()
