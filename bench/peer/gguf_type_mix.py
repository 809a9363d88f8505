#!/usr/bin/python3
"""Prints the real mix of tensor types in a GGUF file, most frequent first ("145 Q4_0, 121 F32, 24 Q4_K"), so
that a result table names what a "Q4_K" file holds (dllm convert and llama-quantize both fall back where rows
are not whole blocks). Reads only the header: GGUF v3, little-endian (github.com/ggml-org/ggml docs/gguf.md).

    python3 bench/peer/gguf_type_mix.py FILE.gguf
"""
import collections
import struct
import sys

TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
         12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # value type -> bytes


def main(path):
    with open(path, "rb") as f:
        def read(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def read_str():
            return f.read(read("Q")).decode("utf-8", "replace")

        def skip_value(vtype):
            if vtype == 8:
                read_str()
            elif vtype == 9:
                inner, n = read("I"), read("Q")
                for _ in range(n):
                    skip_value(inner)
            elif vtype in SCALAR:
                f.read(SCALAR[vtype])
            else:
                sys.exit(f"{path}: unknown metadata value type {vtype}")

        if f.read(4) != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = read("I"), read("Q"), read("Q")
        if version != 3:
            sys.exit(f"{path}: GGUF version {version} (this reads 3)")
        for _ in range(n_kv):
            read_str()
            skip_value(read("I"))
        counts = collections.Counter()
        for _ in range(n_tensors):
            read_str()
            for _ in range(read("I")):
                read("Q")
            counts[TYPES.get(read("I"), "?")] += 1
            read("Q")
    print(", ".join(f"{n} {t}" for t, n in counts.most_common()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
