#!/usr/bin/env python3
"""Renders cases.json with Python Jinja2 configured like transformers' apply_chat_template
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson without ASCII escaping,
raise_exception) and writes expected.jsonl. Run from this directory: python3 gen_expected.py"""
import json
from collections import OrderedDict

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL = {
    "llada": {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>"},
    "qwen2_5": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_system": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "features": {"bos_token": "<B>", "eos_token": "<E>"},
    "features2": {"bos_token": "<B>", "eos_token": "<E>"},
}


# Templates read from a tokenizer_config.json (a real model's or a trimmed copy of one, see README.md). Like
# transformers, only the special tokens that are set (not null) become template variables.
CONFIG_DIRS = {"qwen3": "../qwen3", "llada2": "llada2", "sdar": "sdar"}
SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"]


def load_template(name):
    if name in CONFIG_DIRS:
        cfg = json.load(open(CONFIG_DIRS[name] + "/tokenizer_config.json"))
        special = {k: cfg[k] for k in SPECIAL_KEYS if isinstance(cfg.get(k), str)}
        return cfg["chat_template"], special
    return open(name + ".jinja").read(), SPECIAL[name]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

cases = json.load(open("cases.json"), object_pairs_hook=OrderedDict)
with open("expected.jsonl", "w") as out:
    for case in cases:
        source, special = load_template(case["template"])
        kwargs = dict(special)
        kwargs.update(messages=case["messages"], add_generation_prompt=case.get("add_generation_prompt", False),
                      tools=None, documents=None)
        kwargs.update(case.get("extra", {}))
        rec = {"name": case["name"]}
        try:
            rec["expected"] = env.from_string(source).render(**kwargs)
        except jinja2.exceptions.TemplateError as e:
            rec["error"] = str(e)
        out.write(json.dumps(rec) + "\n")
