#!/usr/bin/env python3
"""Builds small tokenizer.json variants (from the first merges of the mistral7b / gpt4o vocabularies) that
exercise components the three real tokenizers do not use. Expected outputs come from the official library:
node oracle.js (npm tokenizers@0.23.2), see README.md. Run from this directory."""
import json


def subset(path, n_merges, extra_tokens):
    d = json.load(open(path))
    m = d["model"]
    merges = m["merges"][:n_merges]
    pairs = [x.split(" ", 1) if isinstance(x, str) else x for x in merges]
    keep = set(extra_tokens)
    for a, b in pairs:
        keep.update([a, b, a + b])
    vocab = {t: i for t, i in m["vocab"].items() if t in keep or len(t) == 1 or t.startswith("<0x")}
    ids = {t: n for n, t in enumerate(sorted(vocab, key=lambda t: vocab[t]))}
    return ids, merges, d


def write(name, tok):
    with open(name + ".json", "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)


# A: SentencePiece-style with Metaspace (prepend_scheme first), NFKC, added-token flags, Template with EOS.
vocab, merges, base = subset("../mistral7b/tokenizer.json", 3000, ["<unk>", "<s>", "</s>"])
n = len(vocab)
added = [
    {"id": vocab["<unk>"], "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
    {"id": vocab["<s>"], "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
    {"id": vocab["</s>"], "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
    {"id": n, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": True},
    {"id": n + 1, "content": "[SEP]", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False, "special": True},
    {"id": n + 2, "content": "word", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
    {"id": n + 3, "content": "\u2581\u2581", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
]
write("sp_metaspace", {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
    "normalizer": {"type": "NFKC"},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]},
                                          "</s>": {"id": "</s>", "ids": [vocab["</s>"]], "tokens": ["</s>"]}}},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
              "vocab": vocab, "merges": merges}})

# B: normalizer chain (Strip, Replace regex, Prepend, Replace), Digits + Punctuation + Split(MergedWithNext),
# unknown characters fused into <unk> (no byte_fallback), RobertaProcessing, decoder chain with Strip.
vocab_b = {t: i for t, i in vocab.items() if not t.startswith("<0x")}
vocab_b = {t: n for n, t in enumerate(sorted(vocab_b, key=lambda t: vocab_b[t]))}
write("sp_chain", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": vocab_b[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for t in ["<unk>", "<s>", "</s>"]] +
                    # normalized=true: matched in normalized text, in its normalized form ("\u2581New\u2581York")
                    [{"id": len(vocab_b), "content": "New York", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": True, "special": False}],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Punctuation", "behavior": "Contiguous"},
        {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithNext", "invert": False}]},
    "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", vocab_b["</s>"]], "cls": ["<s>", vocab_b["<s>"]],
                       "trim_offsets": True, "add_prefix_space": False},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 1}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False,
              "vocab": vocab_b, "merges": [m for m in merges if all(p in vocab_b for p in m.split(" ", 1))]}})

# C: byte-level with ByteLevel(add_prefix_space, use_regex) pre-tokenizer, ignore_merges, NFD, no post-processor.
vocab_c, merges_c, _ = subset("../gpt4o/tokenizer.json", 4000, [])
vocab_c["Ġinformation"] = len(vocab_c)  # only reachable whole through ignore_merges
write("bl_prefix", {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": len(vocab_c), "content": "<|end|>", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}],
    "normalizer": {"type": "NFD"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
              "vocab": vocab_c, "merges": merges_c}})
