// The tokenizer only where text is: a model whose tokenizer cannot be built (the oracle GGUF's placeholder
// vocabulary) is served on token ids, with one warning at start naming the file and the key; a text prompt then
// answers 400 with that same message, and the server keeps serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { startServer } from './common.mjs';

const gguf = fileURLToPath(new globalThis.URL('../data/gguf/llada_tiny_f32.gguf', import.meta.url));

async function call(url, path, body) {
  const res = await fetch(url + path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

test('a GGUF whose tokenizer cannot be built: token ids served, text 400 with the warning message', async () => {
  const server = await startServer(['-m', gguf, '--dtype', 'f32', '--gen-length', '8', '--max-tokens', '64'],
    { model: false });
  try {
    const warnings = server.log().split('\n').filter((l) => /warning/i.test(l));
    assert.equal(warnings.length, 1, server.log());
    assert.match(warnings[0], /llada_tiny_f32\.gguf/);
    assert.match(warnings[0], /tokenizer\.ggml/);
    const message = warnings[0].replace(/^dllm serve: warning: /, '').replace(/; only token-id prompts can be served$/, '');

    const models = await call(server.url, '/v1/models');
    assert.equal(models.status, 200, models.text);
    assert.equal(models.json.data[0].dllm.tokenizer, 'none');
    assert.equal(models.json.data[0].dllm.tokenizer_error, message);

    const ids = { prompt: [1, 2, 3], max_tokens: 8, steps: 8 };
    let r = await call(server.url, '/v1/completions', ids);
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.choices[0].text, /^[0-9 ]*$/, 'without a tokenizer the text is token ids');

    r = await call(server.url, '/v1/completions', { prompt: 'def add(a, b):', max_tokens: 8 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'prompt');
    assert.ok(r.json.error.message.includes(message), `${r.json.error.message} lacks ${message}`);

    r = await call(server.url, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
    assert.equal(r.status, 400, r.text);
    assert.ok(r.json.error.message.includes(message), `${r.json.error.message} lacks ${message}`);

    r = await call(server.url, '/v1/completions', ids);
    assert.equal(r.status, 200, `still serving after the 400s: ${r.text}`);
  } finally {
    await server.stop();
  }
});
