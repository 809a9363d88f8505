import json, random, glob
random.seed(1234)
texts = []
# Python source chunks
files = sorted(glob.glob('/usr/lib/python3.11/*.py'))
for f in random.sample(files, 12):
    src = open(f, encoding='utf-8', errors='replace').read()
    if len(src) < 100: continue
    a = random.randrange(0, max(1, len(src) - 3000))
    texts.append(src[a:a + random.randrange(200, 3000)])
# long whitespace-free runs
texts += ['a' * 5000, 'ab' * 1500, ''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(4000)),
          ''.join(random.choice('0123456789') for _ in range(1000)), '的' * 700 + '了' * 300,
          ''.join(chr(random.randrange(0x4E00, 0x9FFF)) for _ in range(1500)),
          '😀' * 300, ''.join(random.choice('!@#$%^&*()_+-=[]{};:,./<>?') for _ in range(2000)),
          'x' * 20000]
# unicode zoo
zoo = ['\u0085', '\u2028', '\u2029', '\u00a0', '\u3000', '\u200b', '\ufeff', '\t', '\r\n', '\x0b', '\x0c',
       'e\u0301', 'A\u030a', '\u1e9b\u0323', '\uac00\u11a8', '\u1100\u1161', 'ﬁ', '①', 'Ⅻ', '²', '½',
       '\U0001F469\u200d\U0001F4BB', '\U0001F3F3\ufe0f\u200d\U0001F308', '🇯🇵', '👍🏽', 'ǅ', 'ǈ', 'ß', 'İ', 'ſ', 'K',
       'Ω', 'ﷺ', 'ä', 'a\u0308', '\u0915\u094d\u0937', 'ஸ்ரீ', 'ą̷̧', 'ab\u0300\u0316c', '\u0f73', '\u0344']
for _ in range(40):
    texts.append(''.join(random.choice(zoo + [' ', 'word', 'X', '1', "'s", "'S", "'ll"]) for _ in range(random.randrange(3, 40))))
ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff), (0x900, 0x97f), (0xe00, 0xe7f),
          (0x3040, 0x30ff), (0xac00, 0xd7a3), (0x1f300, 0x1f6ff), (0x2000, 0x206f), (0xff00, 0xffef), (0x10000, 0x1007f)]
for _ in range(40):
    s = []
    for _ in range(random.randrange(5, 200)):
        lo, hi = random.choice(ranges)
        s.append(chr(random.randrange(lo, hi + 1)))
        if random.random() < 0.2: s.append(' ')
    texts.append(''.join(s))
# contractions and case
texts += ["IT'S", "it'S I'M we'RE they'Ve", "don't'll'd", "''s", "A'sB", "x's's's", "Ǆ'S", "ΑΒΓ'Σ"]
# whitespace shapes
texts += ['   ', ' ', '\n', ' \n ', 'a  \n\n  b', '\t\t\tx', '  \r\n\r\n  y', 'end   ', ' \u0085 x', 'a\u0085b', '\u0085\u0085!', '!\u0085!', 'x \u0085y']
# added-token stress
for t in ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<s>', '</s>', '<unk>', '<|endofprompt|>', '<think>', '</think>', '<tool_call>', '<|fim_prefix|>']:
    texts += [t, t + t, 'a' + t + 'b', ' ' + t + ' ', t + '\n' + t, t[:-1], '<' + t + '>', 'x' + t[:-1] + t]
texts += ['', '<s>', ' <s> ', '<s>\n</s>', 'hello<s>', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n']
for t in texts:
    print(json.dumps(t))
