#!/usr/bin/env python3
"""Benign tool results of the kind a file-reading or fetching tool returns: READMEs and source
files of permissively licensed Rust crates and npm packages, as they were installed on the
machine that made this file (the cargo registry's sources, and the node_modules of the npm
server sets). Stdlib only.

    python3 extract.py CARGO_REGISTRY_SRC NODE_MODULES... > repo-files.jsonl

For each package (sorted by sha256 of its name, the first PER_ECOSYSTEM of them with a
permissive licence): its README and one source file (a crate's src/lib.rs or src/main.rs, a
package's `main` script), each cut to MAX_CHARS at a line break. The licence file of each
package goes to licenses/<sha256 of it>.txt (one file per distinct text); LICENSES.md says
which is whose.

Records: kind "result", label "benign", ids "repo-files:<ecosystem>:<name>:<file>", split by
package (split.py). Files holding something like a secret (an example key) are left out.
meta: ecosystem, package, version, licence, file.
"""
import hashlib
import json
import re
import sys
from pathlib import Path

PER_ECOSYSTEM = 220
MAX_CHARS = 3000
PERMISSIVE = re.compile(r"\b(MIT|Apache-2\.0|ISC|BSD-[23]-Clause|0BSD|Unlicense|Zlib)\b")
HERE = Path(__file__).resolve().parent
# split.py's check: a benign item never matches a secret pattern (an example key in a README
# would be a finding of its own, not a false positive of the injection detectors).
sys.path.insert(0, str(HERE.parent))
from split import SECRETS  # noqa: E402


def cut(text):
    if len(text) <= MAX_CHARS:
        return text
    head = text[:MAX_CHARS]
    nl = head.rfind("\n")
    return head[:nl] if nl > MAX_CHARS // 2 else head


def readme(d):
    for name in ("README.md", "readme.md", "README", "README.markdown", "Readme.md"):
        if (d / name).is_file():
            return name
    return None


def licence_file(d):
    for p in sorted(d.iterdir()):
        if p.is_file() and re.match(r"(?i)(licen[cs]e|copying)", p.name):
            return p
    return None


def crates(src):
    seen = set()
    for d in sorted(Path(src).iterdir(), reverse=True):  # the newest version of a crate first
        toml = d / "Cargo.toml"
        if not toml.is_file():
            continue
        t = toml.read_text(errors="replace")
        m = re.search(r'(?m)^license\s*=\s*"([^"]+)"', t)
        name = re.search(r'(?m)^name\s*=\s*"([^"]+)"', t)
        version = re.search(r'(?m)^version\s*=\s*"([^"]+)"', t)
        if not (m and name and version) or name.group(1) in seen:
            continue
        seen.add(name.group(1))
        code = next((f for f in ("src/lib.rs", "src/main.rs") if (d / f).is_file()), None)
        yield name.group(1), version.group(1), m.group(1), d, code


def npm_packages(roots):
    seen = set()
    for root in roots:
        root = Path(root)
        dirs = []
        for d in sorted(root.iterdir()):
            if d.name.startswith("@") and d.is_dir():
                dirs.extend(sorted(x for x in d.iterdir() if x.is_dir()))
            elif d.is_dir() and not d.name.startswith("."):
                dirs.append(d)
        for d in dirs:
            pj = d / "package.json"
            if not pj.is_file():
                continue
            try:
                p = json.loads(pj.read_text(errors="replace"))
            except ValueError:
                continue
            name, version = p.get("name"), p.get("version")
            lic = p.get("license")
            if isinstance(lic, dict):
                lic = lic.get("type")
            if not (isinstance(name, str) and isinstance(version, str) and isinstance(lic, str)):
                continue
            if name in seen:
                continue
            seen.add(name)
            main = p.get("main") if isinstance(p.get("main"), str) else "index.js"
            code = None
            for cand in (main, main + ".js", main + "/index.js"):
                f = (d / cand).resolve()
                if f.is_file() and f.suffix in (".js", ".cjs", ".mjs", ".ts") and d.resolve() in f.parents:
                    code = str(f.relative_to(d.resolve()))
                    break
            yield name, version, lic, d, code


def emit(ecosystem, packages, licences):
    picked = sorted(packages, key=lambda p: hashlib.sha256(p[0].encode()).hexdigest())
    n = 0
    for name, version, lic, d, code in picked:
        if n >= PER_ECOSYSTEM:
            break
        if not PERMISSIVE.search(lic):
            continue
        files = [f for f in (readme(d), code) if f]
        lf = licence_file(d)
        if not files or lf is None:
            continue
        n += 1
        text = lf.read_text(errors="replace")
        kept = hashlib.sha256(text.encode()).hexdigest()[:12] + ".txt"
        (HERE / "licenses").mkdir(exist_ok=True)
        (HERE / "licenses" / kept).write_text(text)
        licences.append((ecosystem, name, version, lic, kept))
        for f in files:
            text = cut((d / f).read_text(errors="replace"))
            if not text.strip() or SECRETS.search(text):
                continue
            print(json.dumps({
                "source": "repo-files", "id": f"repo-files:{ecosystem}:{name}:{f}",
                "kind": "result", "label": "benign", "split": "tune", "text": text,
                "meta": {"ecosystem": ecosystem, "package": name, "version": version,
                         "licence": lic, "file": f}}, ensure_ascii=False))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    licences = []
    emit("crates", crates(sys.argv[1]), licences)
    emit("npm", npm_packages(sys.argv[2:]), licences)
    with open(HERE / "LICENSES.md", "w") as out:
        out.write("# Licences of the packages whose files are in repo-files.jsonl\n\n"
                  "| ecosystem | package | version | licence | its text |\n|---|---|---|---|---|\n")
        for e, n, v, l, f in licences:
            out.write(f"| {e} | {n} | {v} | {l} | `licenses/{f}` |\n")


if __name__ == "__main__":
    main()
