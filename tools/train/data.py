#!/usr/bin/python3
"""Data for the demo dLLM: the Python standard library sources installed by Debian.

Corpus: every `*.py` file under /usr/lib/python3.11 (Debian package libpython3.11-stdlib / python3.11-minimal),
excluding test directories and third-party packages (see EXCLUDE_DIRS). Files are split into train / held-out by a
hash of their path relative to the root:

    held_out  <=>  int(sha1(relpath.encode()).hexdigest()[:8], 16) % 1000 < HELDOUT_PER_MILLE

The exact held-out list is recorded in tools/train/heldout_files.txt (written by `data.py --write-split`) so that
other tools (infill metric, scheduler study) can reuse it without this module.

Usage:
    /usr/bin/python3 tools/train/data.py --write-split      # (re)write heldout_files.txt, print stats
    /usr/bin/python3 tools/train/data.py --check            # verify the recorded list matches the machine
"""
import argparse
import hashlib
import os
import sys

ROOT = "/usr/lib/python3.11"
HELDOUT_PER_MILLE = 30  # 3 % of files
EXCLUDE_DIRS = {
    "site-packages", "dist-packages",  # third-party code
    "test", "tests", "idle_test",      # test suites: test/, lib2to3/tests, idlelib/idle_test, ...
    "__pycache__",
}
HERE = os.path.dirname(os.path.abspath(__file__))
HELDOUT_LIST = os.path.join(HERE, "heldout_files.txt")


def list_files(root=ROOT):
    """All corpus files as sorted relative paths ('/'-separated)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDE_DIRS)
        for fn in filenames:
            if fn.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                out.append(rel)
    return sorted(out)


def is_heldout(rel):
    return int(hashlib.sha1(rel.encode("utf-8")).hexdigest()[:8], 16) % 1000 < HELDOUT_PER_MILLE


def split(root=ROOT):
    files = list_files(root)
    train = [f for f in files if not is_heldout(f)]
    held = [f for f in files if is_heldout(f)]
    return train, held


def read_text(rel, root=ROOT):
    """File text. Decoded as UTF-8 (errors='replace' for the rare non-UTF-8 file); '\\r\\n' kept as is."""
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    return data.decode("utf-8", errors="replace")


def read_heldout_list(path=HELDOUT_LIST):
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-split", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    train, held = split()
    nbytes = lambda fs: sum(os.path.getsize(os.path.join(ROOT, f)) for f in fs)
    print(f"files: {len(train) + len(held)}  train {len(train)} ({nbytes(train)/1e6:.2f} MB)  "
          f"held-out {len(held)} ({nbytes(held)/1e6:.2f} MB)")
    if args.write_split:
        with open(HELDOUT_LIST, "w") as f:
            f.write(f"# held-out files, relative to {ROOT} (Debian python3.11 stdlib), "
                    f"rule: sha1(relpath)[:8] % 1000 < {HELDOUT_PER_MILLE}; all other files listed by "
                    f"tools/train/data.py are training files\n")
            for h in held:
                f.write(h + "\n")
        print("wrote", HELDOUT_LIST)
    if args.check:
        rec = read_heldout_list()
        if rec != held:
            print("MISMATCH between recorded held-out list and this machine", file=sys.stderr)
            sys.exit(1)
        print("held-out list matches")


if __name__ == "__main__":
    main()
