// Bad requests and limits answer 4xx with a JSON error naming the field; auth; /health and /metrics; curl.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { URL, API_KEY, authHeaders, post, model, promptText } from './common.mjs';

const run = promisify(execFile);

async function expectError(body, status, param, path = '/v1/completions') {
  const r = await post(path, body);
  assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 80)} -> ${r.status} ${r.text.slice(0, 200)}`);
  assert.ok(r.json && r.json.error && typeof r.json.error.message === 'string', r.text);
  if (param !== undefined) assert.equal(r.json.error.param, param, r.json.error.message);
  return r.json.error;
}

test('authentication: 401 without or with a wrong key', async (t) => {
  if (!API_KEY) return t.skip('server runs without --api-key');
  const body = JSON.stringify({ prompt: await promptText(), max_tokens: 4 });
  let r = await fetch(`${URL}/v1/completions`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
  assert.equal(r.status, 401);
  assert.match((await r.json()).error.message, /API key/);
  r = await fetch(`${URL}/v1/models`, { headers: { Authorization: 'Bearer wrong' } });
  assert.equal(r.status, 401);
  r = await fetch(`${URL}/health`);
  assert.equal(r.status, 200, '/health needs no key');
});

test('malformed JSON and wrong types name the problem', async () => {
  const bad = await post('/v1/completions', '{"prompt": "x", ');
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /JSON/);
  const p = await promptText();
  await expectError([1, 2], 400, null);
  await expectError({ prompt: p, max_tokens: 'ten' }, 400, 'max_tokens');
  await expectError({ prompt: p, temperature: -1 }, 400, 'temperature');
  await expectError({ prompt: p, stream: 'yes' }, 400, 'stream');
  await expectError({ prompt: p, steps: 0 }, 400, 'steps');
  await expectError({ prompt: p, stop: [1] }, 400, 'stop');
  await expectError({ prompt: p, n: 1000 }, 400, 'n');
  await expectError({ prompt: p, cache: 'everything' }, 400, 'cache');
  await expectError({ prompt: p, alg: 'magic' }, 400, 'alg');
  await expectError({ prompt: p, threshold: 1.5 }, 400, 'threshold');
  await expectError({ prompt: p, max_tokens: 32, block_length: 5 }, 400, 'block_length');
  await expectError({ prompt: p, diffusing: true }, 400, 'diffusing');
});

test('unknown model, empty prompt, missing fields', async () => {
  const p = await promptText();
  await expectError({ model: 'gpt-4', prompt: p }, 400, 'model');
  await expectError({ prompt: '' }, 400, 'prompt');
  await expectError({ prompt: [] }, 400, 'prompt');
  await expectError({ max_tokens: 4 }, 400, 'prompt');
  await expectError({ messages: [] }, 400, 'messages', '/v1/chat/completions');
  await expectError({ messages: 'hi' }, 400, 'messages', '/v1/chat/completions');
  await expectError({ messages: [{ role: 'user' }] }, 400, 'messages[0].content', '/v1/chat/completions');
  await expectError({ messages: [{ role: 'wizard', content: 'x' }] }, 400, 'messages[0].role', '/v1/chat/completions');
});

test('unsupported and unknown fields are refused by name, not ignored', async () => {
  const p = await promptText();
  const e1 = await expectError({ prompt: p, logprobs: 5 }, 400, 'logprobs');
  assert.match(e1.message, /not supported/);
  await expectError({ prompt: p, presence_penalty: 0.5 }, 400, 'presence_penalty');
  await expectError({ prompt: p, tools: [{ type: 'function' }] }, 400, 'tools');
  await expectError({ prompt: p, bogus_field: 1 }, 400, 'bogus_field');
  // Their "off" values are fine.
  const ok = await post('/v1/completions', { prompt: p, max_tokens: 4, steps: 4, presence_penalty: 0, logprobs: null });
  assert.equal(ok.status, 200, ok.text);
});

test('limits: max_tokens, context, body size', async () => {
  const m = await model();
  const p = await promptText();
  const e = await expectError({ prompt: p, max_tokens: m.dllm.limits.max_tokens + 1 }, 400, 'max_tokens');
  assert.match(e.message, /limit/);
  const big = JSON.stringify({ prompt: 'x'.repeat(2 * 1024 * 1024) });
  const r = await post('/v1/completions', big);
  assert.equal(r.status, 413);
  assert.match(r.json.error.message, /body/);
  const nf = await fetch(`${URL}/v1/nothing`, { headers: authHeaders() });
  assert.equal(nf.status, 404);
  assert.ok((await nf.json()).error);
});

test('health and metrics', async () => {
  const h = await (await fetch(`${URL}/health`)).json();
  assert.equal(h.status, 'ok');
  const res = await fetch(`${URL}/metrics`, { headers: authHeaders() });
  assert.equal(res.status, 200);
  const text = await res.text();
  for (const name of ['dllm_requests_total', 'dllm_completion_tokens_total', 'dllm_forwards_total',
                      'dllm_queue_depth', 'dllm_request_seconds_bucket', 'dllm_forward_seconds_bucket',
                      'dllm_first_step_seconds_count'])
    assert.match(text, new RegExp(`^${name}`, 'm'), name);
  assert.match(text, /dllm_requests_total\{endpoint="\/v1\/completions",status="400"\} [1-9]/);
});

test('curl: non-streaming and streaming', async () => {
  const auth = API_KEY ? ['-H', `Authorization: Bearer ${API_KEY}`] : [];
  const body = JSON.stringify({ prompt: await promptText(), max_tokens: 16, steps: 16, seed: 3 });
  const { stdout } = await run('curl', ['-sS', '--fail-with-body', ...auth, '-H', 'Content-Type: application/json',
                                        '-d', body, `${URL}/v1/completions`]);
  const whole = JSON.parse(stdout);
  assert.equal(whole.object, 'text_completion');
  const streamBody = JSON.stringify({ ...JSON.parse(body), stream: true });
  const s = await run('curl', ['-sSN', '--fail-with-body', ...auth, '-H', 'Content-Type: application/json',
                               '-d', streamBody, `${URL}/v1/completions`]);
  const lines = s.stdout.split('\n').filter((l) => l.startsWith('data: '));
  assert.equal(lines.at(-1), 'data: [DONE]');
  const text = lines.slice(0, -1).map((l) => JSON.parse(l.slice(6))).flatMap((c) => c.choices).map((c) => c.text).join('');
  assert.equal(text, whole.choices[0].text);
  const bad = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', ...auth, '-d', '{', `${URL}/v1/completions`]);
  assert.equal(bad.stdout, '400');
});
