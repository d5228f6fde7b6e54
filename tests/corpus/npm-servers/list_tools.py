#!/usr/bin/env python3
"""List the tools of real MCP servers published on npm, over stdio, and write them as benign
definitions. Stdlib only; no network besides what the servers try themselves (none is reachable
from the machine where this was run, so servers that need a remote service to list tools fail).

    mkdir -p /work/research/npm-servers && cd /work/research/npm-servers
    npm install --ignore-scripts --no-audit --no-fund <the packages in SERVERS below>
    python3 list_tools.py /work/research/npm-servers > npm-servers.jsonl 2> list.log

Every server runs with HOME set to a fresh temporary directory and with dummy credentials in
the environment (or arguments) it insists on at start-up; nothing real is needed to *list*.
The handshake: initialize (protocolVersion 2025-06-18), notifications/initialized, then
tools/list following nextCursor. Each server gets TIMEOUT seconds.
meta carries the package name, its installed version and its licence (from its package.json).

Only packages under a permissive licence are written to stdout (the vendorable set). The others
go to NOT_VENDORABLE (npm-servers.not-vendorable.jsonl beside this script): @mapbox/mcp-server
("Copyright Mapbox, All rights reserved"), @sentry/mcp-server (FSL-1.1-ALv2, not OSI until its
Apache-2.0 date). exa-mcp-server (no licence field, but an MIT LICENSE file) and
@modelcontextprotocol/server-sequential-thinking ("SEE LICENSE IN LICENSE"; its README says MIT,
as the modelcontextprotocol/servers repository) are corrected by LICENSE_FIX.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/research/npm-servers")
TIMEOUT = 60
D = "dummy-credential-for-listing"

# package -> (extra args, extra env)
SERVERS = {
    "@modelcontextprotocol/server-sequential-thinking": ([], {}),
    "@modelcontextprotocol/server-github": ([], {"GITHUB_PERSONAL_ACCESS_TOKEN": D}),
    "@modelcontextprotocol/server-gitlab": ([], {"GITLAB_PERSONAL_ACCESS_TOKEN": D}),
    "@modelcontextprotocol/server-slack": ([], {"SLACK_BOT_TOKEN": "xoxb-" + D, "SLACK_TEAM_ID": "T00000000"}),
    "@modelcontextprotocol/server-brave-search": ([], {"BRAVE_API_KEY": D}),
    "@modelcontextprotocol/server-google-maps": ([], {"GOOGLE_MAPS_API_KEY": D}),
    "@modelcontextprotocol/server-puppeteer": ([], {"PUPPETEER_SKIP_DOWNLOAD": "1"}),
    "@modelcontextprotocol/server-postgres": (["postgresql://127.0.0.1:1/none"], {}),
    "@modelcontextprotocol/server-redis": (["redis://127.0.0.1:1"], {}),
    "@modelcontextprotocol/server-gdrive": ([], {}),
    "@modelcontextprotocol/server-everart": ([], {"EVERART_API_KEY": D}),
    "@modelcontextprotocol/server-aws-kb-retrieval": ([], {"AWS_ACCESS_KEY_ID": D, "AWS_SECRET_ACCESS_KEY": D, "AWS_REGION": "us-east-1"}),
    "@modelcontextprotocol/server-pdf": (["--stdio"], {}),
    "@playwright/mcp": ([], {}),
    "chrome-devtools-mcp": ([], {}),
    "@upstash/context7-mcp": ([], {}),
    "@notionhq/notion-mcp-server": ([], {"NOTION_TOKEN": D}),
    "@supabase/mcp-server-supabase": (["--access-token", D], {}),
    "mongodb-mcp-server": ([], {}),
    "@sentry/mcp-server": (["--access-token", D], {}),
    "firecrawl-mcp": ([], {"FIRECRAWL_API_KEY": "fc-" + D}),
    "tavily-mcp": ([], {"TAVILY_API_KEY": "tvly-" + D}),
    "exa-mcp-server": ([], {"EXA_API_KEY": D}),
    "@wonderwhy-er/desktop-commander": ([], {}),
    "mcp-server-kubernetes": ([], {}),
    "@azure-devops/mcp": (["example-org"], {}),
    "@circleci/mcp-server-circleci": ([], {"CIRCLECI_TOKEN": D}),
    "@heroku/mcp-server": ([], {"HEROKU_API_KEY": D}),
    "figma-developer-mcp": (["--figma-api-key", D, "--stdio"], {}),
    "@gongrzhe/server-gmail-autoauth-mcp": ([], {}),
    "@bytebase/dbhub": (["--transport", "stdio", "--dsn", "sqlite:///:memory:"], {}),
    "@apify/actors-mcp-server": ([], {"APIFY_TOKEN": D}),
    "@perplexity-ai/mcp-server": ([], {"PERPLEXITY_API_KEY": D}),
    "@launchdarkly/mcp-server": (["start", "--api-key", D], {}),
    "@mapbox/mcp-server": ([], {"MAPBOX_ACCESS_TOKEN": "pk." + D}),
    "@executeautomation/playwright-mcp-server": ([], {}),
    "@hubspot/mcp-server": ([], {"PRIVATE_APP_ACCESS_TOKEN": D}),
    "@benborla29/mcp-server-mysql": ([], {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "1", "MYSQL_USER": "x", "MYSQL_PASS": "x", "MYSQL_DB": "x"}),
    "@elastic/mcp-server-elasticsearch": ([], {"ES_URL": "http://127.0.0.1:1", "ES_API_KEY": D}),
}


PERMISSIVE = {"MIT", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause", "0BSD"}
LICENSE_FIX = {"exa-mcp-server": "MIT (LICENSE file)",
               "@modelcontextprotocol/server-sequential-thinking": "MIT (README; package says SEE LICENSE IN LICENSE)"}
NOT_VENDORABLE = Path(__file__).resolve().parent / "npm-servers.not-vendorable.jsonl"


def pkg_info(name):
    pj = json.loads((ROOT / "node_modules" / name / "package.json").read_text())
    lic = pj.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    bins = pj.get("bin")
    if isinstance(bins, str):
        entry = bins
    elif isinstance(bins, dict) and bins:
        # prefer a bin named like the package
        short = name.split("/")[-1]
        entry = bins.get(short) or bins.get(name) or sorted(bins.items())[0][1]
    else:
        entry = pj.get("main", "index.js")
    return pj.get("version"), lic, str(ROOT / "node_modules" / name / entry)


class Peer:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, cwd=env["HOME"])
        self.buf = b""
        self.deadline = time.time() + TIMEOUT

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def recv(self, want_id):
        while time.time() < self.deadline:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except Exception:
                    continue  # a server that logs to stdout
                if msg.get("id") == want_id and ("result" in msg or "error" in msg):
                    return msg
            r, _, _ = select.select([self.p.stdout], [], [], 1)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError("server closed stdout")
                self.buf += chunk
        raise TimeoutError("no answer")

    def close(self):
        try:
            self.p.stdin.close()
        except Exception:
            pass
        try:
            self.p.terminate()
            self.p.wait(5)
        except Exception:
            self.p.kill()


def list_tools(name, args, extra_env):
    version, lic, entry = pkg_info(name)
    home = tempfile.mkdtemp(prefix="mcp-home-")
    env = {"PATH": os.environ["PATH"], "HOME": home, "NODE_ENV": "production"}
    env.update(extra_env)
    peer = Peer(["node", entry] + args, env)
    try:
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "corpus-lister", "version": "0"}}})
        init = peer.recv(1)
        if "error" in init:
            raise RuntimeError(f"initialize: {init['error']}")
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor, i = [], None, 2
        while True:
            params = {"cursor": cursor} if cursor else {}
            peer.send({"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": params})
            r = peer.recv(i)
            if "error" in r:
                raise RuntimeError(f"tools/list: {r['error']}")
            tools += r["result"].get("tools", [])
            cursor = r["result"].get("nextCursor")
            i += 1
            if not cursor:
                break
        return version, lic, init["result"].get("serverInfo", {}), tools
    finally:
        peer.close()


def main():
    nv = open(NOT_VENDORABLE, "w")
    for name, (args, env) in SERVERS.items():
        if not (ROOT / "node_modules" / name / "package.json").exists():
            print(f"{name}: not installed", file=sys.stderr)
            continue
        try:
            version, lic, info, tools = list_tools(name, args, env)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", file=sys.stderr)
            continue
        lic = LICENSE_FIX.get(name, lic)
        ok = (lic or "").split(" ")[0] in PERMISSIVE
        print(f"{name}@{version} ({lic}){'' if ok else ' NOT VENDORABLE'}: {len(tools)} tools", file=sys.stderr)
        for t in tools:
            print(json.dumps({
                "source": "npm-servers", "id": f"npm:{name}:{t.get('name')}", "kind": "definition",
                "label": "benign", "tool": t,
                "meta": {"package": name, "version": version, "license": lic,
                         "server_info": info},
            }, ensure_ascii=False, sort_keys=True), file=sys.stdout if ok else nv)


if __name__ == "__main__":
    main()
