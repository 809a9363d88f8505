// The block-diffusion families (SDAR, LLaDA2.x) served end to end with the official openai client: each test
// starts its own `dllm serve` on a tiny oracle model. Those models have no tokenizer.json (and the tokenizer
// fixture's ids would not be these models' tokens), so they are served with the "ids" codec: a prompt is token
// ids (an array, or decimal numbers in a string) and the text is the generated ids written as decimal numbers.
// The tiny LLaDA2 config names no [MASK] id: it is served with --mask-id / --eos-id, as the oracle's cases give
// them to the official generate().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { chromium } from 'playwright-core';
import { OUT, readSSE, startServer } from './common.mjs';

const models = fileURLToPath(new globalThis.URL('../data/oracle/models/', import.meta.url));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// The oracle's LLaDA2.1 case Q_p0_g32_b8 (tests/data/oracle/golden/llada2_tiny_f32/generate_llada2_1.json).
const P0 = [281, 160, 15, 381, 272, 28, 154, 314, 409, 147];
const LLADA21 = ['-m', join(models, 'llada2_tiny_f32'), '--dtype', 'f32', '--mask-id', '503', '--eos-id', '500',
                 '--threshold', '0.7', '--editing-threshold', '0.5', '--gen-length', '32', '--max-tokens', '64'];
const SDAR = ['-m', join(models, 'sdar_tiny_f32'), '--dtype', 'f32', '--gen-length', '16', '--max-tokens', '64'];

function clientOf(server) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
}

async function call(server, path, body) {
  const res = await fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                body: JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// The streamed text of every choice (openai client), by index.
async function streamed(client, body) {
  const stream = await client.completions.create({ ...body, stream: true });
  const text = [];
  const finish = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text[c.index] = (text[c.index] || '') + c.text;
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  return { text, finish };
}

test('SDAR: streamed text equals the non-streamed text; n choices; block fields', { timeout: 180000 }, async () => {
  const server = await startServer(SDAR, { model: false });
  try {
    const client = clientOf(server);
    const models = await client.models.list();
    assert.equal(models.data[0].dllm.architecture, 'sdar');
    assert.equal(models.data[0].dllm.block_size, 4);
    for (const extra of [{}, { temperature: 0.8, seed: 5 }, { cache: 'none' }, { remasking: 'sequential' },
                         { stop_ids: [] }, { block_length: 8, steps: 4 }]) {
      const body = { model: models.data[0].id, prompt: P0, max_tokens: 16, n: 2, ...extra };
      const whole = await client.completions.create(body);
      assert.equal(whole.choices.length, 2);
      assert.match(whole.choices[0].text, /^[0-9 ]+$/, 'the ids codec: generated ids as numbers');
      const s = await streamed(client, body);
      for (const c of whole.choices) {
        assert.equal(s.text[c.index], c.text, `choice ${c.index} ${JSON.stringify(extra)}`);
        assert.equal(s.finish[c.index], c.finish_reason);
      }
      if (!extra.temperature) assert.equal(whole.choices[0].text, whole.choices[1].text, 'greedy: equal choices');
    }
    // A diffusing stream: every step has the canvas, committed positions and no edits (SDAR never edits).
    const res = await fetch(server.url + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: P0, max_tokens: 16, stream: true, diffusing: true }) });
    const { events, done } = await readSSE(res);
    assert.ok(done);
    const steps = events.filter((e) => e.diffusion);
    assert.ok(steps.length >= 4, `${steps.length} diffusing events`);
    for (const e of steps) {
      const row = e.diffusion.rows[0];
      assert.deepEqual(row.edited, []);
      assert.ok(row.final >= 0 && row.final <= row.length);
    }
  } finally {
    await server.stop();
  }
});

test('block fields: bad values answer 400 naming the field; the server keeps serving', { timeout: 120000 }, async () => {
  const server = await startServer(SDAR, { model: false });
  try {
    const cases = [
      [{ block_loop: 'llada3' }, 'block_loop'], [{ minimal_topk: 0 }, 'minimal_topk'],
      [{ eos_early_stop: 'yes' }, 'eos_early_stop'], [{ editing_threshold: 2 }, 'editing_threshold'],
      [{ max_post_steps: -1 }, 'max_post_steps'], [{ num_to_transfer: 0 }, 'num_to_transfer'],
      [{ stop_ids: 'none' }, 'stop_ids'], [{ stop_ids: [1, 9999] }, 'stop_ids'], [{ mask_id: 512 }, 'mask_id'],
      [{ stop_at_eos: true }, 'stop_at_eos'], [{ cfg_scale: 1.5 }, 'cfg_scale'], [{ cache: 'dual' }, 'cache'],
      [{ remasking: 'margin' }, 'remasking'],
    ];
    for (const [extra, param] of cases) {
      const r = await call(server, '/v1/completions', { prompt: P0, max_tokens: 8, ...extra });
      assert.equal(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
      assert.equal(r.json.error.param, param, `${JSON.stringify(extra)}: ${r.text}`);
    }
    const r = await call(server, '/v1/completions', { prompt: P0, max_tokens: 8, block_loop: 'sdar' });
    assert.equal(r.status, 200, `still serving after the 400s: ${r.text}`);
  } finally {
    await server.stop();
  }
});

test('LLaDA2.1: a diffusing stream reports edits; streamed text never changes and equals the whole text',
  { timeout: 180000 }, async () => {
    const server = await startServer(LLADA21, { model: false });
    try {
      const client = clientOf(server);
      const body = { prompt: P0, max_tokens: 32, block_length: 8, steps: 32 };
      const whole = await client.completions.create(body);
      const text = whole.choices[0].text;
      assert.match(text, /^[0-9 ]+$/);
      assert.equal((await streamed(client, body)).text[0], text, 'plain stream');

      // The diffusing stream: edits reported beside commits; the text deltas only ever extend the final prefix.
      const res = await fetch(server.url + '/v1/completions', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...body, stream: true, diffusing: true }) });
      const { events, done } = await readSSE(res);
      assert.ok(done);
      let edits = 0;
      let deltas = '';
      let lastFinal = 0;
      for (const e of events) {
        if (e.diffusion) {
          const row = e.diffusion.rows[0];
          edits += row.edited.length;
          for (const i of row.edited) assert.ok(i >= row.final, `an edit at ${i} inside the final prefix ${row.final}`);
          assert.ok(row.final >= lastFinal, 'the final prefix never shrinks');
          lastFinal = row.final;
        }
        for (const c of e.choices || []) if (c.text) deltas += c.text;
      }
      assert.ok(edits > 0, 'the tiny LLaDA2.1 run edits decoded tokens');
      assert.equal(deltas, text, 'diffusing stream text');
      console.log(`LLaDA2.1: ${events.filter((e) => e.diffusion).length} steps, ${edits} edits; text ${text}`);
    } finally {
      await server.stop();
    }
  });

test('LLaDA2.1 /v1/canvas: the model\'s own editing loop redoes and refines spans, the rest byte-identical',
  { timeout: 180000 }, async () => {
    const server = await startServer(LLADA21, { model: false });
    try {
      const client = clientOf(server);
      const golden = JSON.parse(readFileSync(join(fileURLToPath(new globalThis.URL('../data/oracle/golden/',
        import.meta.url)), 'llada2_tiny_f32/generate_llada2_1.json'), 'utf8'));
      const c = (golden.cases || golden).find((x) => x.id === 'Q_p0_g32_b8');
      const ids = (s) => s.trim().split(/\s+/).map(Number);
      // Redoing the whole generated part (prompt + masks to whole blocks) with max_post_steps editing passes is
      // the official LLaDA2.1 generate(): the golden final canvas.
      const masks = c.final_canvas.length - P0.length;
      const redo = await client.post('/canvas', { body: { text: `${P0.join(' ')} <|mask:${masks}|>`, block_length: 8,
                                                          refine: c.kwargs.max_post_steps } });
      assert.deepEqual(ids(redo.text), c.final_canvas);
      assert.ok(redo.refine.every((r) => r.remasked === undefined), 'editing passes remask nothing');

      // Refine a span of that answer: only the span may change; the passes are streamed with their edits.
      const doc = redo.text;
      const start = doc.indexOf(' ', doc.length / 2) + 1;
      const spans = [{ start, end: doc.length }];
      const stream = await client.post('/canvas', { body: { text: doc, spans, mode: 'refine', refine: 2,
                                                            editing_threshold: 0.0, stream: true }, stream: true });
      let final = null;
      const rounds = new Set();
      for await (const ev of stream) {
        if (ev.object === 'canvas.chunk') {
          rounds.add(ev.dllm.round);
          assert.ok(ev.dllm.text.startsWith(doc.slice(0, start)), 'the text before the span never changes');
        } else if (ev.object === 'canvas') final = ev;
      }
      assert.ok(final);
      assert.equal(final.text.slice(0, start), doc.slice(0, start));
      assert.deepEqual([...rounds].sort(), [...rounds].filter((r) => r >= 1 && r <= 2).sort());
      assert.equal(final.refine.length, 2);

      const bad = await call(server, '/v1/canvas', { text: doc, spans, mode: 'refine', refine_tokens: 3 });
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.param, 'refine_tokens');
      const sdarLoop = await call(server, '/v1/canvas', { text: doc, spans, mode: 'refine', block_loop: 'sdar' });
      assert.equal(sdarLoop.status, 400, sdarLoop.text);
    } finally {
      await server.stop();
    }
  });

test('web page on LLaDA2.1: edits are drawn as edits, final text equals the API answer', { timeout: 180000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} is not installed (apt-get install chromium)`);
    const server = await startServer(LLADA21, { model: false });
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
      await page.goto(server.url + '/');
      await page.waitForFunction(() => window.dllm.model !== null);
      assert.equal(await page.inputValue('#block-length'), '32', 'a block model: the model block size');
      await page.selectOption('#mode', 'completion');
      await page.fill('#gen-length', '32');
      await page.fill('#steps', '32');
      await page.fill('#block-length', '8');
      await page.fill('#threshold', '0.7');
      await page.fill('#prompt', P0.join(' '));
      await page.evaluate(() => {
        window.drawn = [];
        new MutationObserver(() => {
          const c = document.querySelector('#canvas');
          window.drawn.push({ edit: c.querySelectorAll('.tok.edit').length, edited: c.querySelectorAll('.tok.edited').length });
        }).observe(document.querySelector('#canvas'), { childList: true });
      });
      await page.click('#run');
      await page.waitForFunction(() => window.dllm.done || window.dllm.error, null, { timeout: 120000 });
      const state = await page.evaluate(() => ({ dllm: window.dllm, drawn: window.drawn,
                                                 final: document.querySelector('#final').textContent,
                                                 edits: document.querySelector('#edits').textContent,
                                                 legend: document.querySelector('.legend .tok.edit') !== null }));
      await page.screenshot({ path: join(OUT, 'browser-llada21.png'), fullPage: true });
      assert.equal(state.dllm.error, null);
      assert.deepEqual(errors, []);
      assert.ok(state.legend, 'the legend names the edit style');
      assert.ok(Number(state.edits) > 0, 'the page counts edits');
      assert.ok(state.drawn.some((d) => d.edit > 0), 'a canvas drew a token as an edit');
      const api = await call(server, '/v1/completions', { prompt: P0, max_tokens: 32, steps: 32, block_length: 8,
                                                          threshold: 0.7, temperature: 0, seed: 0 });
      assert.equal(api.status, 200, api.text);
      assert.equal(state.final, api.json.choices[0].text);
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
      await server.stop();
    }
  });
