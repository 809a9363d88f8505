#!/usr/bin/python3
"""Corpus v2 of the demo models: the Python 3.11 standard library plus the Python sources of Debian packages.

    # 1. fetch the packages (no install: .deb files only) and unpack them outside the repo
    mkdir -p /work/corpus/debs && cd /work/corpus/debs && \
        xargs -a /work/main/tools/train/corpus_packages.txt -n1 sh -c 'apt-get download "${0%%=*}"'
    mkdir -p /work/corpus/root && for d in /work/corpus/debs/*.deb; do dpkg-deb -x "$d" /work/corpus/root; done
    # 2. select, split and write the two documents files (NUL-separated UTF-8, xz) + the held-out list
    /usr/bin/python3 tools/train/corpus.py --root /work/corpus/root --out /work/corpus/v2

Selection (deterministic, recorded so a later session rebuilds the same corpus from the same package versions):
  * the standard library exactly as corpus v1 (data.py: /usr/lib/python3.11 minus tests and third-party dirs), with
    the same relative paths, so v1's 14 held-out files stay held out;
  * every `*.py` under the unpacked packages, except test / vendored directories (EXCLUDE_DIRS), `test_*.py`,
    files over MAX_FILE_BYTES or under 64 bytes, generated-looking files (a line over 1000 characters, or over 100
    characters per line on average), files that hold one of the tokenizer's special-token strings, and exact
    duplicates (sha1 of the bytes, first path in sorted order wins; the stdlib goes first);
  * at most PER_PACKAGE_CAP bytes per top-level package (files taken in sha1(key) order), so that a few large,
    partly generated packages (plotly's validators, sympy's tables) do not dominate.
Split by file, as v1: held out iff int(sha1(key)[:8], 16) % 1000 < 30, where key is the stdlib relative path, or
"dist-packages/<path below dist-packages>" (other locations: the path below the unpacked root).
"""
import argparse
import hashlib
import lzma
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402

EXCLUDE_DIRS = {"test", "tests", "testing", "idle_test", "__pycache__", "_vendor", "vendor", "vendored",
                "_vendored", "externals", "extern"}
MAX_FILE_BYTES = 200_000
PER_PACKAGE_CAP = 2_500_000
SPECIAL = ("<|endoftext|>", "<|startoftext|>", "<|mdm_mask|>", "<|fim_prefix|>", "<|fim_middle|>",
           "<|fim_suffix|>")
HELDOUT_LIST_V2 = os.path.join(HERE, "heldout_files_v2.txt")


def key_of(rel):
    """Split key and package of a path below the unpacked root."""
    parts = rel.split("/")
    if "dist-packages" in parts:
        i = parts.index("dist-packages")
        below = parts[i + 1:]
        return "dist-packages/" + "/".join(below), below[0].removesuffix(".py")
    return rel, parts[3] if len(parts) > 4 else parts[0]


def acceptable(text_bytes):
    if len(text_bytes) > MAX_FILE_BYTES or len(text_bytes) < 64:
        return False
    lines = text_bytes.split(b"\n")
    if max(len(ln) for ln in lines) > 1000 or len(text_bytes) / len(lines) > 100:
        return False
    text = text_bytes.decode("utf-8", errors="replace")
    return not any(s in text for s in SPECIAL)


def collect(root):
    """[(key, package, text)] for the stdlib and the unpacked packages, after the selection rules."""
    seen = set()
    docs = []
    for rel in data.list_files():  # corpus v1, untouched
        b = open(os.path.join(data.ROOT, rel), "rb").read()
        seen.add(hashlib.sha1(b).hexdigest())
        docs.append((rel, "stdlib", data.read_text(rel)))
    cands = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDE_DIRS)
        for fn in sorted(filenames):
            if fn.endswith(".py") and not fn.startswith("test_"):
                cands.append(os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/"))
    per_pkg = {}
    by_hash = sorted(cands, key=lambda r: hashlib.sha1(key_of(r)[0].encode()).hexdigest())
    for rel in by_hash:
        b = open(os.path.join(root, rel), "rb").read()
        h = hashlib.sha1(b).hexdigest()
        if h in seen or not acceptable(b):
            continue
        key, pkg = key_of(rel)
        if per_pkg.get(pkg, 0) + len(b) > PER_PACKAGE_CAP:
            continue
        seen.add(h)
        per_pkg[pkg] = per_pkg.get(pkg, 0) + len(b)
        docs.append((key, pkg, b.decode("utf-8", errors="replace")))
    docs.sort(key=lambda d: (d[1] != "stdlib", d[0]))
    return docs, per_pkg


def write_docs(path, docs):
    """Documents as UTF-8 separated by NUL (no Python source selected here holds one), xz-compressed."""
    with lzma.open(path, "wb", preset=9) as f:
        for i, (_, _, text) in enumerate(docs):
            if i:
                f.write(b"\0")
            f.write(text.replace("\0", "").encode("utf-8"))


def read_docs(path):
    with lzma.open(path, "rb") as f:
        return f.read().decode("utf-8").split("\0")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="the unpacked packages (dpkg-deb -x of each .deb)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    docs, per_pkg = collect(args.root)
    train = [d for d in docs if not data.is_heldout(d[0])]
    held = [d for d in docs if data.is_heldout(d[0])]
    write_docs(os.path.join(args.out, "train.txt.xz"), train)
    write_docs(os.path.join(args.out, "heldout.txt.xz"), held)
    with open(HELDOUT_LIST_V2, "w") as f:
        f.write("# corpus v2 held-out files (tools/train/corpus.py): stdlib paths relative to /usr/lib/python3.11, "
                "package paths as dist-packages/...; rule sha1(key)[:8] % 1000 < 30\n")
        for d in held:
            f.write(d[0] + "\n")
    mb = lambda ds: sum(len(d[2].encode()) for d in ds) / 1e6
    print(f"files {len(docs)} from {len(per_pkg) + 1} packages: train {len(train)} ({mb(train):.1f} MB), "
          f"held-out {len(held)} ({mb(held):.1f} MB); stdlib {sum(d[1] == 'stdlib' for d in docs)} files")
    top = sorted(per_pkg.items(), key=lambda kv: -kv[1])[:15]
    print("largest packages (MB):", ", ".join(f"{k} {v / 1e6:.1f}" for k, v in top))


if __name__ == "__main__":
    main()
