// POST /v1/canvas (docs/server.md "Canvas editing") through the official openai client's generic post(): spans
// redone in context, refine rounds, the streamed steps; everything outside the spans comes back byte for byte.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, model, outsideSpans, post, promptText } from './common.mjs';

const cp = (s) => [...s].length;  // spans are code-point ranges

const outside = outsideSpans;

test('canvas: placeholders are filled in context, the rest is byte-identical', async () => {
  const m = await model();
  const before = await promptText('The quick brown');
  const after = await promptText(' jumps over the lazy dog');
  const r = await client.post('/canvas', { body: { model: m.id, text: `${before}<|mask:6|>${after}`, seed: 3 } });
  assert.equal(r.object, 'canvas');
  assert.match(r.id, /^canvas-/);
  assert.equal(r.spans.length, 1);
  const s = r.spans[0];
  assert.equal(s.tokens, 6);
  assert.equal(s.masked, 0);
  assert.equal(s.start, cp(before));
  assert.equal(s.end - s.start, cp(s.text));
  assert.deepEqual(outside(r.text, r.spans), [before, after]);
  assert.equal(r.text, before + s.text + after);
  assert.equal(r.usage.completion_tokens, 6);
  assert.ok(r.dllm.forwards > 0);
  assert.deepEqual(r.refine, []);
});

test('canvas: spans of a previous answer are redone; refine rounds report what they changed', async () => {
  const m = await model();
  const first = await client.completions.create({ model: m.id, prompt: await promptText(), max_tokens: 24, seed: 1 });
  const doc = (await promptText()) + first.choices[0].text;
  const n = cp(doc);
  const spans = [{ start: Math.floor(n / 4), end: Math.floor(n / 2) }, { start: Math.floor(3 * n / 4), end: n }];
  const r = await client.post('/canvas', { body: { model: m.id, text: doc, spans, refine: 2, refine_tokens: 2,
                                                   seed: 5 } });
  assert.equal(r.spans.length, 2);
  assert.deepEqual(outside(r.text, r.spans), outside(doc, spans), 'the text outside the spans is unchanged');
  assert.equal(r.refine.length, 2);
  for (const [i, round] of r.refine.entries()) {
    assert.equal(round.round, i + 1);
    assert.equal(round.remasked, 2);
    assert.ok(round.changed >= 0 && round.changed <= 2);
  }
  // mode "refine": the spans keep their text and only rounds touch them.
  const refined = await client.post('/canvas', { body: { model: m.id, text: doc, spans, mode: 'refine', refine: 1,
                                                         refine_tokens: 1 } });
  assert.deepEqual(outside(refined.text, refined.spans), outside(doc, spans));
  assert.equal(refined.refine[0].remasked, 1);
  assert.ok(refined.dllm.forwards >= 2, 'a scoring forward, then the round');
});

test('canvas: streamed steps show only the spans changing, then the final document', async () => {
  const m = await model();
  const before = await promptText('Once upon');
  const after = await promptText(' the end');
  const text = `${before}<|mask:8|>${after}`;
  const stream = await client.post('/canvas', { body: { model: m.id, text, steps: 4, refine: 1, refine_tokens: 2,
                                                        seed: 2, stream: true }, stream: true });
  const chunks = [];
  let final = null;
  for await (const ev of stream) {
    if (ev.object === 'canvas.chunk') chunks.push(ev.dllm);
    else if (ev.object === 'canvas') final = ev;
  }
  assert.ok(final, 'the final document comes last');
  assert.equal(chunks.length, 4 + 2, 'four fill steps, then a round of two');
  let masked = 9;
  for (const [i, c] of chunks.entries()) {
    assert.equal(c.forwards, i + 1);
    assert.equal(c.round, i < 4 ? 0 : 1);
    assert.ok(c.text.startsWith(before) && c.text.endsWith(after), 'outside the span never changes');
    const s = c.spans[0];
    assert.equal(s.pieces.length, 8);
    assert.equal(s.pieces.filter((p) => p === null).length, s.masked);
    if (c.round === 0) {
      assert.ok(s.masked < masked, 'every fill step commits');
      masked = s.masked;
    }
  }
  assert.equal(chunks[3].spans[0].masked, 0);
  assert.equal(final.text, chunks.at(-1).text);
  assert.equal(final.dllm.forwards, 6);
});

test('canvas: bad requests are 400s naming the field', async () => {
  const m = await model();
  const cases = [
    [{ text: 'no placeholder here' }, 'text'],
    [{ text: 'a <|mask:2|>', max_tokens: 4 }, 'max_tokens'],
    [{ text: 'a <|mask:2|>', mode: 'polish' }, 'mode'],
    [{ text: 'abc', spans: [{ start: 2, end: 1 }] }, 'spans'],
    [{ text: 'abc', spans: [{ start: 0, end: 9 }] }, 'spans'],
    [{ text: 'a <|mask:2|>', refine: -1 }, 'refine'],
  ];
  for (const [body, param] of cases) {
    const r = await post('/v1/canvas', { model: m.id, ...body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.json.error.param, param, JSON.stringify(r.json));
  }
  await assert.rejects(client.post('/canvas', { body: { text: 'x', spans: 3 } }), (e) => e.status === 400);
});
