#!/usr/bin/python3
"""Reference byte-level BPE encoder/decoder with Hugging Face `tokenizers` semantics (pure Python).

Loads the tokenizer.json written by tokenizer_train.py and encodes exactly as HF `tokenizers` does for it:
  1. added (special) tokens are split out of the text first (they match anywhere, no normalisation);
  2. `Split` pre-tokenizer with the Qwen2 regex, behaviour Isolated (every match is a word, gaps too);
  3. `ByteLevel` pre-tokenizer (use_regex false): the UTF-8 bytes of each word mapped to the GPT-2 byte alphabet;
  4. BPE within each word: merges applied by rank, exactly as HF `Word::merge_all` (a min-heap on
     (rank, position), expired entries skipped, new neighbour pairs pushed after each merge).
No normaliser, no post-processor (no BOS/EOS added). The Rust library's regex engine (Oniguruma) is emulated with
Python `re` by expanding \\p{L}, \\p{N} and \\s into explicit character classes built from `unicodedata`.
"""
import heapq
import json
import re
import sys
import unicodedata

# Qwen2 / Qwen2.5 pre-tokenizer pattern (the one written into tokenizer.json, Oniguruma syntax).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")

# Oniguruma's \s for Unicode strings: 0x09-0x0D, 0x85 and the Zs/Zl/Zp categories (= Unicode White_Space).
_WS = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B)) + \
      [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def _ranges_to_class(cps):
    cps = sorted(set(cps))
    out, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        a, b = cps[i], cps[j]
        esc = lambda c: "\\U%08x" % c
        out.append(esc(a) if a == b else esc(a) + "-" + esc(b))
        i = j + 1
    return "".join(out)


_CLASS_CACHE = {}


def _classes():
    if not _CLASS_CACHE:
        L, N = [], []
        for cp in range(0x110000):
            cat = unicodedata.category(chr(cp))
            if cat[0] == "L":
                L.append(cp)
            elif cat[0] == "N":
                N.append(cp)
        _CLASS_CACHE["L"] = _ranges_to_class(L)
        _CLASS_CACHE["N"] = _ranges_to_class(N)
        _CLASS_CACHE["S"] = _ranges_to_class(_WS)
    return _CLASS_CACHE


def compile_qwen2_pattern():
    """Python `re` translation of QWEN2_PATTERN (same alternation order, same backtracking semantics)."""
    c = _classes()
    L, N, S = c["L"], c["N"], c["S"]
    pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
           rf"|[^\r\n{L}{N}]?[{L}]+"
           rf"|[{N}]"
           rf"| ?[^{S}{L}{N}]+[\r\n]*"
           rf"|[{S}]*[\r\n]+"
           rf"|[{S}]+(?![^{S}])"
           rf"|[{S}]+")
    return re.compile(pat)


def bytes_to_unicode():
    """GPT-2 byte -> printable unicode char mapping (as HF ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_ENC = bytes_to_unicode()
BYTE_DEC = {v: k for k, v in BYTE_ENC.items()}


def split_words(regex, text):
    """HF Split(behavior=Isolated, invert=false): matches are words, and so are the gaps between them."""
    out, pos = [], 0
    for m in regex.finditer(text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def to_byte_level(word):
    return "".join(BYTE_ENC[b] for b in word.encode("utf-8"))


class BPETokenizer:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        model = tj["model"]
        assert model["type"] == "BPE"
        self.vocab = dict(model["vocab"])
        self.merges = {}  # (a_id, b_id) -> (rank, new_id), as HF MergeMap
        for rank, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.merges[(self.vocab[a], self.vocab[b])] = (rank, self.vocab[a + b])
        self.added = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        for t, i in self.added.items():
            self.id_to_token[i] = t
        self.special_ids = {t["id"] for t in tj.get("added_tokens", []) if t.get("special")}
        pts = tj["pre_tokenizer"]["pretokenizers"]
        assert pts[0]["type"] == "Split" and pts[0]["pattern"]["Regex"] == QWEN2_PATTERN
        self.regex = compile_qwen2_pattern()
        if self.added:
            alts = sorted(self.added, key=len, reverse=True)  # longest first, like the HF AddedVocab trie
            self.added_re = re.compile("|".join(re.escape(a) for a in alts))
        else:
            self.added_re = None
        self.cache = {}

    def __len__(self):
        return max(self.id_to_token) + 1

    def token_to_id(self, t):
        return self.added.get(t, self.vocab.get(t))

    def _bpe(self, word_bl):
        """HF Word::merge_all on one byte-level word; returns token ids."""
        ids = [self.vocab[ch] for ch in word_bl]
        n = len(ids)
        if n < 2:
            return ids
        c = ids[:]                      # symbol ids
        alive = [True] * n
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1)); nxt[-1] = -1
        merges = self.merges
        heap = []
        for i in range(n - 1):
            m = merges.get((c[i], c[i + 1]))
            if m is not None:
                heap.append((m[0], i, m[1]))
        heapq.heapify(heap)
        while heap:
            rank, pos, new_id = heapq.heappop(heap)
            if not alive[pos]:
                continue
            nx = nxt[pos]
            if nx == -1:
                continue
            m = merges.get((c[pos], c[nx]))
            if m is None or m[1] != new_id:
                continue
            c[pos] = new_id
            alive[nx] = False
            nn = nxt[nx]
            nxt[pos] = nn
            if nn != -1:
                prev[nn] = pos
            p = prev[pos]
            if p >= 0:
                m = merges.get((c[p], c[pos]))
                if m is not None:
                    heapq.heappush(heap, (m[0], p, m[1]))
            if nn != -1:
                m = merges.get((c[pos], c[nn]))
                if m is not None:
                    heapq.heappush(heap, (m[0], pos, m[1]))
        return [c[i] for i in range(n) if alive[i]]

    def encode_ordinary(self, text):
        """Encode text that contains no special tokens (no added-token splitting)."""
        out = []
        cache = self.cache
        for w in split_words(self.regex, text):
            ids = cache.get(w)
            if ids is None:
                ids = self._bpe(to_byte_level(w))
                if len(cache) < 500000:
                    cache[w] = ids
            out.extend(ids)
        return out

    def encode(self, text):
        if self.added_re is None:
            return self.encode_ordinary(text)
        out, pos = [], 0
        for m in self.added_re.finditer(text):
            if m.start() > pos:
                out.extend(self.encode_ordinary(text[pos:m.start()]))
            out.append(self.added[m.group()])
            pos = m.end()
        if pos < len(text):
            out.extend(self.encode_ordinary(text[pos:]))
        return out

    def decode(self, ids, skip_special_tokens=False):
        """ByteLevel decoder (invalid UTF-8 replaced with U+FFFD, like HF)."""
        out, buf = [], []
        for i in ids:
            t = self.id_to_token[int(i)]
            if int(i) in self.special_ids or t in self.added:
                if buf:
                    out.append(bytes(buf).decode("utf-8", errors="replace"))
                    buf = []
                if not (skip_special_tokens and int(i) in self.special_ids):
                    out.append(t)
            else:
                buf.extend(BYTE_DEC[ch] for ch in t)
        if buf:
            out.append(bytes(buf).decode("utf-8", errors="replace"))
        return "".join(out)


if __name__ == "__main__":
    tok = BPETokenizer(sys.argv[1])
    text = sys.argv[2] if len(sys.argv) > 2 else "def f(x):\n    return x + 1\n"
    ids = tok.encode(text)
    print(ids)
    print([tok.id_to_token[i] for i in ids])
    print(repr(tok.decode(ids)))
