// One server, two models, and the router behind model "auto" (docs/hybrid.md): the shipped demo dLLM
// (models/demo) beside an autoregressive model (the tiny Qwen2 of tests/data/oracle/ar: random weights, the
// real Qwen2 tokenizer and chat template). Its own servers (not run.sh's). The official `openai` client sends a
// mix of named and `auto` requests, streamed and not; each answer's dllm.route says where it went, /metrics
// counts it; diffusion-only fields to the AR model, unknown models and requests no model can serve are 400s.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { readSSE, startServer } from './common.mjs';

const root = new globalThis.URL('../../', import.meta.url).pathname;
const DLLM = `${root}models/demo`;
const AR = `${root}tests/data/oracle/ar/models/qwen2_tiny`;
const SHORT = 32;  // --route-short-max-tokens

let server, client;
// Accepted requests by model and reason, as /metrics must count them.
const routed = {};
function count(model, reason) {
  const key = `${model}|${reason}`;
  routed[key] = (routed[key] || 0) + 1;
}

before(async () => {
  server = await startServer(['--model', `dllm=${DLLM}`, '--model', `qwen=${AR}`, '--dtype', 'f32',
                              '--gen-length', '16', '--max-tokens', '256', '--route-short-max-tokens', String(SHORT),
                              '--route-keywords', 'rewrite,refactor,fill in'], { model: false });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
});

after(async () => {
  if (server) await server.stop();
});

async function raw(path, body) {
  const res = await fetch(server.url + path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

const chat = (content) => [{ role: 'user', content }];

// A chat answer, whole and streamed: same text; the route in the answer and in the first chunk.
async function chatBoth(body, model, reason) {
  const whole = await client.chat.completions.create(body);
  assert.equal(whole.dllm.route.model, model, JSON.stringify(whole.dllm.route));
  assert.equal(whole.dllm.route.reason, reason, JSON.stringify(whole.dllm.route));
  assert.equal(whole.model, model, 'the answer names the model that answered');
  assert.ok(whole.dllm.route.detail.length > 0);
  count(model, reason);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const chunks = [];
  let text = '', finish = null;
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const c of chunk.choices) {
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  count(model, reason);
  assert.deepEqual(chunks[0].dllm.route, whole.dllm.route, 'the first chunk carries the route');
  assert.ok(chunks.slice(1).every((c) => c.dllm === undefined), 'only the first');
  assert.ok(chunks.every((c) => c.model === model));
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  return { whole, chunks, text };
}

test('/v1/models lists both models with their kind, and auto', async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, ['dllm', 'qwen', 'auto']);
  const [d, q, a] = list.data;
  assert.equal(d.dllm.kind, 'diffusion');
  assert.equal(d.dllm.default, true);
  assert.equal(d.dllm.architecture, 'llada');
  assert.equal(q.dllm.kind, 'autoregressive');
  assert.equal(q.dllm.default, false);
  assert.equal(q.dllm.architecture, 'qwen2');
  assert.equal(q.dllm.chat_template, true, 'its own chat template');
  assert.equal(q.dllm.vocab_size, 512);
  assert.equal(d.dllm.vocab_size, 4096, 'each model its own tokenizer');
  assert.equal(a.dllm.kind, 'router');
  assert.deepEqual(a.dllm.models, [{ id: 'dllm', kind: 'diffusion' }, { id: 'qwen', kind: 'autoregressive' }]);
  assert.equal(a.dllm.policy.short_max_tokens, SHORT);
  assert.deepEqual(a.dllm.policy.keywords, ['rewrite', 'refactor', 'fill in']);
  assert.equal((await client.models.retrieve('auto')).dllm.kind, 'router');
  assert.equal((await client.models.retrieve('qwen')).dllm.kind, 'autoregressive');
  const health = await (await fetch(`${server.url}/health`)).json();
  assert.equal(health.status, 'ok');
  assert.equal(health.model, 'dllm');
  assert.deepEqual(health.models.map((m) => [m.id, m.kind]), [['dllm', 'diffusion'], ['qwen', 'autoregressive']]);
});

test('auto: a short chat goes to the AR model, which streams token deltas (no diffusing events)', async () => {
  // Text deltas as tokens come (several tokens in one delta when the client reads slower than the model decodes,
  // none for a token that ends inside a UTF-8 character): up to 3 tries to see the answer split, since under
  // ThreadSanitizer the tiny model can finish before the stream is first read.
  let deltas = [];
  for (let attempt = 0; attempt < 3 && deltas.length < 2; ++attempt) {
    const { whole, chunks } = await chatBoth({ model: 'auto', messages: chat('Name a colour.'), max_tokens: 12 },
                                             'qwen', 'short_generation');
    assert.equal(whole.dllm.route.kind, 'autoregressive');
    assert.match(whole.dllm.route.detail, /max_tokens 12 <= 32/);
    assert.ok(whole.usage.completion_tokens > 0);
    assert.ok(chunks.every((c) => c.diffusion === undefined));
    deltas = chunks.filter((c) => c.choices.some((x) => x.delta.content));
    assert.ok(deltas.length >= 1 && deltas.length <= whole.usage.completion_tokens, `${deltas.length} deltas`);
  }
  assert.ok(deltas.length >= 2, `${deltas.length} deltas in each of 3 tries`);
});

test('auto: a long generation goes to the dLLM', async () => {
  const { whole } = await chatBoth({ model: 'auto', messages: chat('Write a loop.'), max_tokens: 48 },
                                   'dllm', 'long_generation');
  assert.equal(whole.dllm.route.kind, 'diffusion');
  assert.equal(whole.dllm.route.detail, 'max_tokens 48 > 32: long generation -> diffusion (dllm)');
});

test('auto: a rewrite-style chat goes to the dLLM', async () => {
  const { whole } = await chatBoth({ model: 'auto', messages: chat('Please rewrite this: x = x + 1'), max_tokens: 16 },
                                   'dllm', 'keyword');
  assert.match(whole.dllm.route.detail, /keyword 'rewrite' in the last user message/);
});

test('auto: a completion with a suffix (infill) goes to the dLLM; streamed equals whole', async () => {
  const body = { model: 'auto', prompt: 'def add(a, b):\n', suffix: '\n\nprint(add(1, 2))\n', max_tokens: 16 };
  const whole = await client.completions.create(body);
  assert.equal(whole.dllm.route.model, 'dllm');
  assert.equal(whole.dllm.route.reason, 'infill');
  assert.equal(whole.model, 'dllm');
  assert.ok(whole.usage.completion_tokens > 0 && whole.usage.completion_tokens <= 16);
  count('dllm', 'infill');
  const stream = await client.completions.create({ ...body, stream: true });
  let text = '', first = null;
  for await (const chunk of stream) {
    first = first || chunk;
    for (const c of chunk.choices) text += c.text;
  }
  count('dllm', 'infill');
  assert.equal(first.dllm.route.reason, 'infill');
  assert.equal(text, whole.choices[0].text);
  // The diffusing stream of an infill shows the masks between prompt and suffix only.
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true, diffusing: true }),
  });
  const { events, done } = await readSSE(res);
  count('dllm', 'infill');
  assert.ok(done);
  const steps = events.filter((e) => e.diffusion);
  assert.equal(steps.length, 16, 'one event per step (one token per step)');
  assert.ok(steps.every((e) => e.diffusion.rows[0].length === 16));
  assert.equal(steps.at(-1).diffusion.rows[0].masked, 0);
});

test('auto: diffusion-only fields and diffusing streams go to the dLLM', async () => {
  const r = await client.chat.completions.create({ model: 'auto', messages: chat('hi'), max_tokens: 8, steps: 8 });
  assert.equal(r.dllm.route.model, 'dllm');
  assert.equal(r.dllm.route.reason, 'diffusion_fields');
  assert.match(r.dllm.route.detail, /'steps' is a diffusion-only field/);
  count('dllm', 'diffusion_fields');
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'auto', messages: chat('hi'), max_tokens: 8, stream: true, diffusing: true }),
  });
  const { events, done } = await readSSE(res);
  count('dllm', 'diffusion_fields');
  assert.ok(done);
  assert.equal(events[0].dllm.route.reason, 'diffusion_fields');
  assert.ok(events.some((e) => e.diffusion), 'the dLLM streams its canvas');
});

test('named models and the default: reasons requested / default', async () => {
  const a = await client.completions.create({ model: 'qwen', prompt: 'Hello', max_tokens: 100, seed: 1 });
  assert.equal(a.model, 'qwen');
  assert.deepEqual([a.dllm.route.model, a.dllm.route.reason], ['qwen', 'requested'],
                   'a named model is not routed, even for a long generation');
  count('qwen', 'requested');
  const b = await client.chat.completions.create({ model: 'dllm', messages: chat('hi'), max_tokens: 8 });
  assert.deepEqual([b.dllm.route.model, b.dllm.route.reason], ['dllm', 'requested']);
  count('dllm', 'requested');
  const c = await raw('/v1/completions', { prompt: 'def f():', max_tokens: 8 });
  assert.equal(c.status, 200, c.text);
  assert.deepEqual([c.json.model, c.json.dllm.route.reason], ['dllm', 'default']);
  count('dllm', 'default');
  // The AR model: sampling fields it takes (temperature, top_p, top_k, seed), n choices, stop.
  const d = await client.chat.completions.create({ model: 'qwen', messages: chat('hi'), max_tokens: 8, n: 2,
                                                   temperature: 0.8, top_p: 0.9, top_k: 40, seed: 3 });
  assert.equal(d.choices.length, 2);
  count('qwen', 'requested');
});

test('both models at once: concurrent answers equal the same requests alone', async () => {
  const requests = [
    { model: 'auto', messages: chat('Name a fruit.'), max_tokens: 12 },
    { model: 'auto', messages: chat('Write a function.'), max_tokens: 40 },
    { model: 'qwen', messages: chat('Count to three.'), max_tokens: 16, temperature: 0.7, seed: 5 },
    { model: 'dllm', messages: chat('Sort a list.'), max_tokens: 24, temperature: 0.7, seed: 5 },
  ];
  const alone = [];
  for (const body of requests) alone.push(await client.chat.completions.create(body));
  const together = await Promise.all(requests.map((body) => client.chat.completions.create(body)));
  for (let i = 0; i < requests.length; ++i) {
    assert.equal(together[i].model, alone[i].model);
    assert.equal(together[i].choices[0].message.content, alone[i].choices[0].message.content, `request ${i}`);
    count(alone[i].model, alone[i].dllm.route.reason);
    count(alone[i].model, alone[i].dllm.route.reason);
  }
  assert.deepEqual(alone.map((r) => r.model), ['qwen', 'dllm', 'qwen', 'dllm']);
});

test('errors: unknown model, diffusion-only fields and infill to the AR model', async () => {
  const expect400 = async (promise, param, pattern) => {
    await assert.rejects(promise, (e) => {
      assert.equal(e.status, 400, e.message);
      assert.equal(e.param, param, e.message);
      if (pattern) assert.match(e.error.message, pattern);
      return true;
    });
  };
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4', messages: chat('hi') }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.code, 'model_not_found');
    assert.match(e.error.message, /unknown model 'gpt-4'; this server serves 'dllm', 'qwen', 'auto'/);
    return true;
  });
  assert.equal((await raw('/v1/models/gpt-4')).status, 404);
  for (const [field, value] of [['steps', 8], ['block_length', 8], ['threshold', 0.9], ['diffusing', true],
                                ['remasking', 'random'], ['cfg_scale', 1], ['mask_id', 3], ['cache', 'prefix']])
    await expect400(client.chat.completions.create({ model: 'qwen', messages: chat('hi'), max_tokens: 8,
                                                     [field]: value }),
                    field, new RegExp(`'${field}' applies to diffusion models only; 'qwen' is an autoregressive`));
  await expect400(client.completions.create({ model: 'qwen', prompt: 'def f(', suffix: '):', max_tokens: 8 }),
                  'suffix', /needs a diffusion model/);
  // Sampling fields the AR model does not take are refused as before.
  await expect400(client.chat.completions.create({ model: 'qwen', messages: chat('hi'), logprobs: true }), 'logprobs');
  // Chat has no suffix, whichever model auto picks.
  await expect400(client.chat.completions.create({ model: 'auto', messages: chat('hi'), suffix: 'x' }), 'suffix');
  // The server keeps serving.
  const ok = await client.chat.completions.create({ model: 'qwen', messages: chat('hi'), max_tokens: 4 });
  count('qwen', 'requested');
  assert.equal(ok.object, 'chat.completion');
});

test('/metrics counts every accepted request by model and reason, and each model has its series', async () => {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const got = {};
  for (const m of text.matchAll(/^dllm_route_total\{model="([^"]+)",reason="([^"]+)"\} (\d+)$/gm))
    got[`${m[1]}|${m[2]}`] = Number(m[3]);
  assert.deepEqual(got, routed);
  assert.match(text, /^dllm_model_info\{model="dllm",kind="diffusion",architecture="llada"\} 1$/m);
  assert.match(text, /^dllm_model_info\{model="qwen",kind="autoregressive",architecture="qwen2"\} 1$/m);
  for (const model of ['dllm', 'qwen']) {
    for (const name of ['dllm_completion_tokens_total', 'dllm_forwards_total', 'dllm_denoising_steps_total']) {
      const m = new RegExp(`^${name}\\{model="${model}"\\} (\\d+)$`, 'm').exec(text);
      assert.ok(m && Number(m[1]) > 0, `${name} ${model}`);
    }
    assert.match(text, new RegExp(`^dllm_request_seconds_count\\{model="${model}"\\} [1-9]`, 'm'));
    assert.match(text, new RegExp(`^dllm_queue_depth\\{model="${model}"\\} 0$`, 'm'));
  }
});

test('one kind loaded: auto sends everything there, and a request it cannot serve is a 400 naming the field',
     async () => {
  const only = await startServer(['--model', `qwen=${AR}`, '--dtype', 'f32', '--gen-length', '8'], { model: false });
  try {
    const c = new OpenAI({ baseURL: `${only.url}/v1`, apiKey: 'none', maxRetries: 0 });
    assert.deepEqual((await c.models.list()).data.map((m) => m.id), ['qwen', 'auto']);
    const r = await c.chat.completions.create({ model: 'auto', messages: chat('Please rewrite it'), max_tokens: 200 });
    assert.deepEqual([r.dllm.route.model, r.dllm.route.reason], ['qwen', 'only_kind']);
    const res = await fetch(`${only.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'auto', prompt: 'def f(', suffix: '):', max_tokens: 8 }),
    });
    const body = await res.json();
    assert.equal(res.status, 400);
    assert.equal(body.error.param, 'suffix');
    assert.match(body.error.message, /needs a diffusion model.*\(model "auto" chose 'qwen': only autoregressive models/);
    assert.equal(body.dllm.route.reason, 'only_kind', 'the error says where auto sent it');
    await assert.rejects(c.completions.create({ model: 'auto', prompt: 'x', steps: 4 }),
                         (e) => e.status === 400 && e.param === 'steps');
    const metrics = await (await fetch(`${only.url}/metrics`)).text();
    assert.match(metrics, /^dllm_route_total\{model="qwen",reason="only_kind"\} 1$/m, 'refused requests are not counted');
  } finally {
    await only.stop();
  }
});
