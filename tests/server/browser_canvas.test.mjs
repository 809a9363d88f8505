// The page's document editor in headless Chromium (Debian's chromium, driven by playwright-core): generate, select
// a span of the answer and redo it (everything outside the span byte-identical, the span changed, only the span
// drawn with masks); type over a part, then refine in the background (the typed text stays, each round is shown).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { URL, API_KEY, OUT, model, outsideSpans } from './common.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const cps = (s) => [...s];
const asTyped = (s) => s.replace(/\r/g, '\n');  // the page's document: a textarea reads \r as \n

const outside = outsideSpans;

test('web page: redo a selected span, type over, refine in the background', { timeout: 180000 }, async (t) => {
  if (!existsSync(CHROMIUM)) return t.skip(`${CHROMIUM} is not installed (apt-get install chromium)`);
  const m = await model();
  const prompt = m.dllm.tokenizer === 'ids' ? '12 7 99 45 3 201' : 'Once upon a time';
  const profile = mkdtempSync(join(tmpdir(), 'dllm-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1100, height: 900 },
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
    await page.selectOption('#mode', 'completion');
    await page.fill('#gen-length', '32');
    await page.fill('#steps', '32');
    await page.fill('#block-length', '32');
    await page.fill('#temperature', '0');
    await page.fill('#threshold', '0');
    await page.fill('#prompt', prompt);
    assert.ok(await page.isDisabled('#redo'), 'nothing to redo before an answer');
    await page.click('#run');
    await page.waitForFunction(() => window.dllm.done || window.dllm.error, null, { timeout: 120000 });
    const answer = await page.inputValue('#doc');
    assert.equal(answer, asTyped(await page.evaluate(() => window.dllm.final)), 'the document is the answer');
    const n = cps(answer).length;
    assert.ok(n >= 8, `answer of ${n} code points`);

    // 1. Select the middle third and redo it (temperature 1: a new draw, so the span changes).
    const [a, b] = [Math.floor(n / 3), Math.floor((2 * n) / 3)];
    await page.fill('#temperature', '1');
    await page.evaluate(([a, b]) => {
      const el = document.querySelector('#doc');
      const utf16 = (cp) => [...el.value].slice(0, cp).join('').length;
      el.focus();
      el.setSelectionRange(utf16(a), utf16(b));
    }, [a, b]);
    await page.evaluate(() => {
      window.drawnDoc = [];
      new MutationObserver(() => {
        const c = document.querySelector('#canvas');
        window.drawnDoc.push({ masks: c.querySelectorAll('.mask').length, spanTokens: c.querySelectorAll('.tok.span').length,
                               text: c.textContent });
      }).observe(document.querySelector('#canvas'), { childList: true });
    });
    await page.click('#redo');
    await page.waitForFunction(() => window.dllm.edit && !window.dllm.edit.running, null, { timeout: 120000 });
    const redo = await page.evaluate(() => ({ edit: window.dllm.edit, drawn: window.drawnDoc }));
    assert.equal(redo.edit.error, null);
    assert.ok(redo.edit.done);
    const redone = await page.inputValue('#doc');
    const span = redo.edit.final.spans[0];
    const prefixLen = cps(prompt).length;  // completion mode: the prompt is the document's fixed context
    assert.equal(cps(redone).slice(0, a).join(''), cps(answer).slice(0, a).join(''), 'before the span: unchanged');
    assert.equal(cps(redone).slice(span.end - prefixLen).join(''), cps(answer).slice(b).join(''),
                 'after the span: unchanged');
    assert.notEqual(asTyped(span.text), cps(answer).slice(a, b).join(''), 'the span was redone');
    assert.equal(redone, cps(answer).slice(0, a).join('') + asTyped(span.text) + cps(answer).slice(b).join(''));
    const withMasks = redo.drawn.filter((d) => d.masks > 0);
    assert.ok(withMasks.length >= 1, `saw ${withMasks.length} canvases with masks`);
    for (const d of redo.drawn) assert.ok(d.masks + d.spanTokens > 0, 'only the span is drawn as tokens');
    await page.screenshot({ path: join(OUT, 'browser-canvas-redo.png'), fullPage: true });

    // 2. Type over the first characters: the typed text is fixed from now on.
    await page.evaluate(() => {
      const el = document.querySelector('#doc');
      el.focus();
      el.setSelectionRange(0, [...el.value].slice(0, 3).join('').length);
    });
    const typed = m.dllm.tokenizer === 'ids' ? '7 ' : 'Tom';
    await page.keyboard.type(typed);
    const before = await page.inputValue('#doc');
    assert.ok(before.startsWith(typed));

    // 3. Refine in the background: two rounds over what the model wrote, each shown.
    await page.fill('#temperature', '0');
    await page.fill('#refine-rounds', '2');
    await page.fill('#refine-tokens', '2');
    await page.click('#refine');
    await page.waitForFunction(() => window.dllm.edit && window.dllm.edit.kind === 'refine' && !window.dllm.edit.running,
                               null, { timeout: 120000 });
    const refine = await page.evaluate(() => window.dllm.edit);
    assert.equal(refine.error, null);
    assert.equal(refine.refine.length, 2);
    assert.deepEqual(refine.chunks.map((c) => c.round).filter((r) => r > 0).filter((r, i, all) => all.indexOf(r) === i),
                     [1, 2], 'each round is shown');
    const req = refine.request;
    assert.ok(req.spans.every((s) => s.start >= prefixLen + cps(typed).length || s.end <= prefixLen),
              'the typed text is never a span');
    assert.deepEqual(outside(refine.final.text, refine.final.spans), outside(req.text, req.spans),
                     'text outside the model-written spans (the prompt, the typed text) is byte-identical');
    const after = await page.inputValue('#doc');
    assert.ok(after.startsWith(typed), 'the typed text stays');
    assert.equal(prompt + after, asTyped(refine.final.text));
    assert.deepEqual(errors, []);
    await page.screenshot({ path: join(OUT, 'browser-canvas-refine.png'), fullPage: true });
    console.log(`canvas page: redo ${redo.edit.chunks.length} steps (span "${span.text}"), refine rounds ` +
                JSON.stringify(refine.refine));
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
