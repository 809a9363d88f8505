// DiffusionGemma behind `dllm serve` (docs/server.md "DiffusionGemma"): the tiny uniform-state checkpoint of
// tests/data/dgemma, on servers of its own (not run.sh's). Without a tokenizer the server speaks token ids, so a
// completion, whole and streamed, is compared token for token with `dllm generate` for the same prompt, settings
// and seed. Its sampler's fields go by the reference's names; a masked-diffusion field or a bad value is a 400
// naming the field while the server keeps serving; a client that goes away mid-canvas cancels its job. Beside an
// autoregressive model and with the tiny tokenizer fixture, chat goes through the text path and the router sends
// the DiffusionGemma fields to it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { chromium } from 'playwright-core';
import { OUT, readSSE, startServer, sleep } from './common.mjs';

const root = new globalThis.URL('../../', import.meta.url).pathname;
const MODEL = `${root}tests/data/dgemma/models/dgemma_tiny_f32`;
const TOKENIZER = `${root}tests/server/fixtures/tiny_tokenizer`;
const AR = `${root}tests/data/oracle/ar/models/qwen2_tiny`;
const PROMPT = [2, 339, 406, 14, 408, 238];
const EOS = [1, 106, 50];  // generation_config.json's eos_token_id
const L = 16;              // canvas_length

let ids, both;  // the DiffusionGemma model alone (ids codec); beside the AR model, with a tokenizer

before(async () => {
  ids = await startServer(['-m', MODEL, '--dtype', 'f32', '--gen-length', '16', '--max-tokens', '256'],
                          { model: false });
  ids.client = new OpenAI({ baseURL: `${ids.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  both = await startServer(['--model', `dgemma=${MODEL}`, '--tokenizer', TOKENIZER, '--model', `qwen=${AR}`,
                            '--dtype', 'f32', '--gen-length', '16', '--max-tokens', '256',
                            '--route-short-max-tokens', '32'], { model: false });
  both.client = new OpenAI({ baseURL: `${both.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
});

after(async () => {
  if (ids) await ids.stop();
  if (both) await both.stop();
});

async function raw(server, path, body) {
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

// `dllm generate --json` on the same model: its output rows (one per --prompt-ids).
function generate(rows, args) {
  const out = execFileSync(process.env.DLLM_BIN,
                           ['generate', '-m', MODEL, '--dtype', 'f32', ...rows.flatMap((r) => ['--prompt-ids', r.join(',')]),
                            ...args, '--json'], { encoding: 'utf8' });
  return JSON.parse(out);
}

// The answer a row gives: its first max_tokens tokens up to the first EOS, as the ids codec writes them.
function answer(row, maxTokens) {
  const cut = row.slice(0, maxTokens);
  const end = cut.findIndex((t) => EOS.includes(t));
  return { text: (end < 0 ? cut : cut.slice(0, end)).join(' '), finish: end < 0 ? 'length' : 'stop' };
}

async function metric(server, name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = new RegExp(`^${name}\\{model="[^"]*"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

test('/v1/models shows a diffusion model with a canvas and its sampler defaults', async () => {
  const [m] = (await ids.client.models.list()).data;
  assert.equal(m.dllm.kind, 'diffusion');
  assert.equal(m.dllm.architecture, 'diffusion_gemma');
  assert.equal(m.dllm.canvas_length, L);
  assert.equal(m.dllm.mask_id, -1, 'no mask token');
  assert.equal(m.dllm.tokenizer, 'ids');
  assert.deepEqual(m.dllm.defaults, { max_tokens: 16, max_denoising_steps: 48, t_min: 0.4, t_max: 0.8,
                                      entropy_bound: 0.1, stability_threshold: 1, confidence_threshold: 0.005 });
});

test('a completion gives the tokens dllm generate gives (whole canvases, cut to max_tokens)', async () => {
  for (const [maxTokens, seed] of [[32, 1], [20, 5]]) {
    const settings = { max_denoising_steps: 8, t_max: 0.9, entropy_bound: 0.2, seed };
    const want = generate([PROMPT], ['--max-new-tokens', String(maxTokens), '--max-denoising-steps', '8',
                                     '--t-max', '0.9', '--entropy-bound', '0.2', '--seed', String(seed)]);
    const whole = await ids.client.completions.create({ model: 'dgemma_tiny_f32', prompt: PROMPT, max_tokens: maxTokens,
                                                        ...settings });
    const { text, finish } = answer(want.outputs[0], maxTokens);
    assert.equal(whole.choices[0].text, text, `max_tokens ${maxTokens}, seed ${seed}`);
    assert.equal(whole.choices[0].finish_reason, finish);
    assert.equal(whole.usage.completion_tokens, text.split(' ').length);
    assert.equal(whole.dllm.forwards, want.forwards, 'the same decoder forwards');
  }
});

test('streamed with diffusing events: every step of every choice, text as canvases are committed', async () => {
  const maxTokens = 40, n = 2;
  const want = generate([PROMPT, PROMPT], ['--max-new-tokens', String(maxTokens), '--max-denoising-steps', '6',
                                           '--seed', '3']);
  const res = await fetch(`${ids.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: maxTokens, max_denoising_steps: 6, seed: 3, n,
                           stream: true, diffusing: true }),
  });
  assert.equal(res.status, 200);
  const texts = Array(n).fill(''), finish = Array(n).fill(null);
  const final = Array(n).fill(0);  // per choice, the last step's final prefix
  const shown = [];                // per text chunk: its choice's tokens so far, what was final, steps seen
  let steps = 0;
  const { done } = await readSSE(res, (ev) => {
    if (ev.diffusion) {
      ++steps;
      assert.equal(ev.diffusion.forwards, steps, 'one decoder forward per step');
      assert.equal(ev.diffusion.rows.length, n, 'every choice in each step');
      for (const row of ev.diffusion.rows) {
        assert.equal(row.masked, 0, 'a uniform-state canvas has no masks');
        assert.equal(row.length, Math.min((ev.diffusion.block + 1) * L, maxTokens), 'committed + current canvas');
        assert.equal(row.canvas.split(' ').length, row.length);
        // The committed canvases are final (all of it once the row ended at an EOS).
        assert.ok(row.final === ev.diffusion.block * L || row.final === row.length, JSON.stringify(row));
        final[row.index] = row.final;
      }
    }
    for (const c of ev.choices) {
      texts[c.index] += c.text || '';
      if (c.text) shown.push({ tokens: texts[c.index].trim().split(' ').length, final: final[c.index], steps });
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  });
  assert.ok(done, '[DONE]');
  assert.equal(steps, want.forwards, 'an event per denoising step');
  // Text while steps go on: never past the final prefix (nothing of the canvas being denoised).
  for (const s of shown.filter((x) => x.steps < steps))
    assert.ok(s.tokens <= s.final, JSON.stringify(s));
  assert.ok(shown.some((x) => x.steps < steps), 'text came before the last step');
  for (let i = 0; i < n; ++i) {
    const a = answer(want.outputs[i], maxTokens);
    assert.equal(texts[i].trim(), a.text, `choice ${i}: the batch row dllm generate gives`);
    assert.equal(finish[i], a.finish);
  }
  assert.notEqual(texts[0], texts[1], 'the two rows draw differently');
  // Plain streaming (no diffusing events) and the whole answer agree.
  const stream = await ids.client.completions.create({ prompt: PROMPT, max_tokens: maxTokens, max_denoising_steps: 6,
                                                       seed: 3, n, stream: true });
  const plain = Array(n).fill('');
  for await (const chunk of stream) for (const c of chunk.choices) plain[c.index] += c.text;
  assert.deepEqual(plain, texts);
});

test('masked-diffusion fields and bad values are 400s naming the field; the server keeps serving', async () => {
  const cases = [
    [{ steps: 8 }, 'steps', /max_denoising_steps/],
    [{ block_length: 16 }, 'block_length', /uniform-state canvas model/],
    [{ remasking: 'random' }, 'remasking', /does not apply/],
    [{ temperature: 0.5 }, 'temperature', /t_max/],
    [{ t_min: 'hot' }, 't_min', /must be a number/],
    [{ t_min: 0.9 }, 't_min', /below 't_max'/],
    [{ max_denoising_steps: 0 }, 'max_denoising_steps', /must be in/],
    [{ entropy_bound: false }, 'entropy_bound', /must be a number/],
    [{ suffix: '4 5' }, 'suffix', /infill/],
  ];
  for (const [extra, param, message] of cases) {
    const r = await raw(ids, '/v1/completions', { prompt: PROMPT, max_tokens: 16, ...extra });
    assert.equal(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
    assert.equal(r.json.error.param, param);
    assert.match(r.json.error.message, message);
  }
  const canvas = await raw(ids, '/v1/canvas', { text: '2 <|mask:2|>' });
  assert.equal(canvas.status, 400);
  assert.match(canvas.json.error.message, /no mask token/);
  // The official client sees the same error; then an ordinary request is answered.
  await assert.rejects(ids.client.completions.create({ prompt: PROMPT, max_tokens: 16, steps: 4 }),
                       (e) => e.status === 400 && e.param === 'steps');
  const ok = await ids.client.completions.create({ prompt: PROMPT, max_tokens: 16, max_denoising_steps: 2 });
  assert.ok(ok.choices[0].text.length > 0);
});

test('a client that leaves mid-canvas cancels its job (streamed with and without diffusing events)', async () => {
  // Never stable: the canvas would take 100000 steps, so only a cancel ends it.
  const body = { prompt: PROMPT, max_tokens: 16, max_denoising_steps: 100000, stability_threshold: 1000,
                 stream: true };
  const before = await metric(ids, 'dllm_cancelled_total');
  for (const diffusing of [true, false]) {
    const controller = new AbortController();
    const res = await fetch(`${ids.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: controller.signal,
      body: JSON.stringify({ ...body, diffusing }),
    });
    const reader = res.body.getReader();
    await reader.read();  // the first chunk
    if (!diffusing) await sleep(300);  // a few steps that write nothing
    controller.abort();
    let cancelled = before, active = 1;
    for (let i = 0; i < 100 && (cancelled < before + (diffusing ? 1 : 2) || active > 0); i++) {
      await sleep(100);
      cancelled = await metric(ids, 'dllm_cancelled_total');
      active = await metric(ids, 'dllm_active_requests');
    }
    assert.equal(cancelled, before + (diffusing ? 1 : 2), `diffusing ${diffusing}: the job was cancelled`);
    assert.equal(active, 0);
  }
  const ok = await ids.client.completions.create({ prompt: PROMPT, max_tokens: 16, max_denoising_steps: 2 });
  assert.equal(ok.choices[0].finish_reason === 'length' || ok.choices[0].finish_reason === 'stop', true);
});

test('beside an AR model: chat through the tokenizer, and the router sends its fields to it', async () => {
  const list = (await both.client.models.list()).data;
  assert.deepEqual(list.map((m) => [m.id, m.dllm.kind]), [['dgemma', 'diffusion'], ['qwen', 'autoregressive'], ['auto', 'router']]);
  const messages = [{ role: 'user', content: 'Name a colour.' }];
  const body = { model: 'dgemma', messages, max_tokens: 32, max_denoising_steps: 6, seed: 2 };
  const whole = await both.client.chat.completions.create(body);
  assert.equal(whole.model, 'dgemma');
  assert.ok(whole.usage.prompt_tokens > 4, 'the chat template rendered and encoded');
  let streamed = '';
  for await (const chunk of await both.client.chat.completions.create({ ...body, stream: true }))
    for (const c of chunk.choices) streamed += c.delta.content || '';
  assert.equal(streamed, whole.choices[0].message.content, 'the same text streamed');
  // model "auto": a DiffusionGemma field picks it (a short chat would go to the AR model).
  const routed = await both.client.chat.completions.create({ model: 'auto', messages, max_tokens: 16, t_min: 0.3 });
  assert.equal(routed.dllm.route.model, 'dgemma');
  assert.equal(routed.dllm.route.reason, 'diffusion_fields');
  const short = await both.client.chat.completions.create({ model: 'auto', messages, max_tokens: 8 });
  assert.equal(short.dllm.route.model, 'qwen');
  // Its fields are a 400 on the AR model.
  const r = await raw(both, '/v1/chat/completions', { model: 'qwen', messages, max_tokens: 8, max_denoising_steps: 4 });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'max_denoising_steps');
});

test('the web page draws its canvases and ends with the API answer', { timeout: 180000 }, async (t) => {
  const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} is not installed (apt-get install chromium)`);
  const profile = mkdtempSync(join(tmpdir(), 'dllm-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1100, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = browser.pages()[0] || await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(ids.url + '/');
    await page.waitForFunction(() => window.dllm.model !== null);
    assert.equal(await page.inputValue('#steps'), '48', 'steps per canvas: the model\'s max_denoising_steps');
    await page.selectOption('#mode', 'completion');
    await page.fill('#gen-length', '32');
    await page.fill('#steps', '6');
    await page.fill('#seed', '4');
    await page.click('#prompt');
    await page.keyboard.type(PROMPT.join(' '));
    await page.evaluate(() => {
      window.drawn = 0;
      new MutationObserver(() => { window.drawn += 1; })
        .observe(document.querySelector('#canvas'), { childList: true });
    });
    await page.click('#run');
    await page.waitForFunction(() => window.dllm.done || window.dllm.error, null, { timeout: 120000 });
    const state = await page.evaluate(() => ({ error: window.dllm.error, drawn: window.drawn,
                                               final: document.querySelector('#final').textContent }));
    await page.screenshot({ path: join(OUT, 'browser-diffusion-gemma.png'), fullPage: true });
    assert.equal(state.error, null);
    assert.deepEqual(errors, []);
    assert.ok(state.drawn >= 2, `drew ${state.drawn} canvases`);
    const api = await ids.client.completions.create({ prompt: PROMPT, max_tokens: 32, max_denoising_steps: 6, seed: 4 });
    assert.equal(state.final, api.choices[0].text);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
