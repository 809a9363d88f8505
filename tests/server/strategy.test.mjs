// The strategy words over HTTP: every word of every axis, under every request field that takes it, generates
// (200); an unknown word is a 400 naming the field and listing the words. The words and fields are read from
// docs/denoising.md's generated list, which tests/denoise/strategy_names_test.cpp checks against the table in
// src/denoise/strategy_names.cpp.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { model, post, promptText } from './common.mjs';

function axes() {
  const doc = readFileSync(new globalThis.URL('../../docs/denoising.md', import.meta.url), 'utf8');
  const begin = doc.indexOf('<!-- strategy words: begin');
  const end = doc.indexOf('<!-- strategy words: end -->');
  assert.ok(begin >= 0 && end > begin, 'docs/denoising.md has the strategy words markers');
  const out = [];
  for (const line of doc.slice(doc.indexOf('\n', begin) + 1, end).split('\n')) {
    const fields = line.match(/^\* .*request fields? (.*)\):$/);
    if (fields) out.push({ fields: [...fields[1].matchAll(/`([a-z_]+)`/g)].map((m) => m[1]), words: [] });
    const word = line.match(/^ {2}\* `([a-z_]+)`/);
    if (word) out.at(-1).words.push(word[1]);
  }
  assert.equal(out.length, 4, 'four axes: unmask, schedule, sampler, cache');
  return out;
}

// Words only the block-diffusion loops take (LLaDA / Dream answer 400).
const BLOCK_ONLY = new Set(['low_confidence_static', 'low_confidence_dynamic', 'block']);

test('strategy words: every word under every field generates', async () => {
  const prompt = await promptText();
  const block = (await model()).dllm.block_size > 0;
  let n = 0;
  for (const { fields, words } of axes())
    for (const field of fields)
      for (const word of words) {
        const r = await post('/v1/completions', { prompt, max_tokens: 8, seed: 1, [field]: word });
        if (!block && BLOCK_ONLY.has(word)) {
          // SDAR's remasking words and the block cache: a 400 naming the axis on a bidirectional model.
          assert.equal(r.status, 400, `${field}: ${word} -> ${r.status} ${r.text.slice(0, 200)}`);
          assert.ok(fields.includes(r.json.error.param), `${field}: ${word} -> param ${r.json.error.param}`);
          continue;
        }
        assert.equal(r.status, 200, `${field}: ${word} -> ${r.status} ${r.text.slice(0, 200)}`);
        assert.equal(typeof r.json.choices[0].text, 'string');
        n++;
      }
  assert.ok(n >= 30, `${n} requests`);
});

test('strategy words: an unknown word is a 400 naming the field and listing the words', async () => {
  const prompt = await promptText();
  for (const { fields, words } of axes())
    for (const field of fields) {
      const r = await post('/v1/completions', { prompt, max_tokens: 8, [field]: 'magic' });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.type, 'invalid_request_error');
      assert.equal(r.json.error.param, field);
      assert.match(r.json.error.message, new RegExp(`'magic' is not one of ${words[0]}, ${words[1]}`));
    }
});
