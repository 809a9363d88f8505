// The web page end to end in headless Chromium (Debian's chromium, driven by playwright-core): type a prompt,
// watch the canvas refine over several steps, compare the final text with the API's non-streamed answer for the
// same seed, and leave a screenshot in the test output directory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { URL, API_KEY, OUT, model, post } from './common.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

test('web page: live canvas, final text equals the API answer', { timeout: 180000 }, async (t) => {
  if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} is not installed (apt-get install chromium)`);
  const m = await model();
  const chat = m.dllm.chat_template;
  const prompt = m.dllm.tokenizer === 'ids' ? '12 7 99 45 3 201' : 'Write one sentence about the sea.';
  const settings = { max_tokens: 48, steps: 48, block_length: 16, seed: 11, temperature: 0 };

  const profile = mkdtempSync(join(tmpdir(), 'dllm-chromium-'));
  // A fresh profile directory: playwright passes it as --user-data-dir.
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1100, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = browser.pages()[0] || await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(URL + '/');
    if (API_KEY) await page.fill('#api-key', API_KEY);
    await page.waitForFunction(() => window.dllm.model !== null);
    await page.selectOption('#mode', chat ? 'chat' : 'completion');
    await page.fill('#gen-length', String(settings.max_tokens));
    await page.fill('#steps', String(settings.steps));
    await page.fill('#block-length', String(settings.block_length));
    await page.fill('#seed', String(settings.seed));
    await page.fill('#temperature', String(settings.temperature));
    await page.fill('#threshold', '0');
    await page.click('#prompt');
    await page.keyboard.type(prompt);

    // Record every canvas the page draws: how many positions were pending and how many were new.
    await page.evaluate(() => {
      window.drawn = [];
      new MutationObserver(() => {
        const c = document.querySelector('#canvas');
        window.drawn.push({ step: Number(c.dataset.step || 0), masks: c.querySelectorAll('.mask').length,
                            fresh: c.querySelectorAll('.tok.new').length, text: c.textContent });
      }).observe(document.querySelector('#canvas'), { childList: true });
    });
    await page.click('#run');
    // A picture of the canvas mid-way, while positions are still pending (best effort: a fast model may finish first).
    await page.waitForFunction(() => document.querySelectorAll('#canvas .mask').length > 0 || window.dllm.done,
                               null, { polling: 'raf', timeout: 120000 });
    await page.screenshot({ path: join(OUT, 'browser-intermediate.png') });
    await page.waitForFunction(() => window.dllm.done || window.dllm.error, null, { timeout: 120000 });
    const state = await page.evaluate(() => ({ dllm: window.dllm, drawn: window.drawn,
                                               final: document.querySelector('#final').textContent,
                                               step: document.querySelector('#step').textContent,
                                               tps: document.querySelector('#tps').textContent }));
    await page.screenshot({ path: join(OUT, 'browser.png'), fullPage: true });
    assert.equal(state.dllm.error, null);
    assert.deepEqual(errors, []);

    const intermediate = state.drawn.filter((d) => d.masks > 0);
    assert.ok(intermediate.length >= 2, `saw ${intermediate.length} intermediate canvases`);
    assert.ok(state.drawn.every((d) => d.fresh > 0), 'each drawn step highlights what it committed');
    assert.ok(Number(state.step) >= 2);
    assert.ok(Number(state.tps) > 0);

    const body = { model: m.id, ...settings };
    if (chat) body.messages = [{ role: 'user', content: prompt }];
    else body.prompt = prompt;
    const api = await post(chat ? '/v1/chat/completions' : '/v1/completions', body);
    assert.equal(api.status, 200, api.text);
    const expected = chat ? api.json.choices[0].message.content : api.json.choices[0].text;
    assert.equal(state.final, expected);
    assert.equal(state.dllm.final, expected);
    console.log(`browser: ${state.drawn.length} canvases drawn, ${intermediate.length} with pending masks; ` +
                `screenshot ${join(OUT, 'browser.png')}`);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
