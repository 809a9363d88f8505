// The official `openai` npm client against `dllm serve`: non-streaming, streaming, and the diffusing stream.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, model, promptText } from './common.mjs';

const settings = { max_tokens: 32, steps: 32, block_length: 16, seed: 7 };

test('models list names the served model', async () => {
  const m = await model();
  assert.equal(typeof m.id, 'string');
  assert.equal(m.object, 'model');
  assert.ok(m.dllm.vocab_size > 0);
});

test('completions: non-streaming answer, deterministic for a seed', async () => {
  const m = await model();
  const prompt = await promptText();
  const a = await client.completions.create({ model: m.id, prompt, ...settings });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices.length, 1);
  assert.equal(typeof a.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(a.choices[0].finish_reason));
  assert.ok(a.usage.prompt_tokens > 0);
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  const b = await client.completions.create({ model: m.id, prompt, ...settings });
  assert.equal(b.choices[0].text, a.choices[0].text);
});

test('completions: streamed text equals the non-streamed text, then the stream ends', async () => {
  const m = await model();
  const prompt = await promptText();
  const whole = await client.completions.create({ model: m.id, prompt, ...settings });
  const stream = await client.completions.create({ model: m.id, prompt, ...settings, stream: true,
                                                   stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.ok(chunks >= 2);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('chat: non-streaming and streaming agree', async (t) => {
  const m = await model();
  if (!m.dllm.chat_template) return t.skip('model has no chat template');
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Name a colour.' }];
  const whole = await client.chat.completions.create({ model: m.id, messages, ...settings });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  const stream = await client.chat.completions.create({ model: m.id, messages, ...settings, stream: true });
  let text = '', role = null, finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
});

test('diffusing: a canvas event after every step, text deltas unchanged', async () => {
  const m = await model();
  const prompt = await promptText();
  const whole = await client.completions.create({ model: m.id, prompt, ...settings });
  const stream = await client.completions.create({ model: m.id, prompt, ...settings, stream: true, diffusing: true });
  const steps = [];
  let text = '';
  for await (const chunk of stream) {
    if (chunk.diffusion) steps.push(chunk.diffusion);
    for (const c of chunk.choices) text += c.text;
  }
  assert.equal(text, whole.choices[0].text, 'ordinary clients see the same text');
  assert.ok(steps.length >= 2, `got ${steps.length} step events`);
  let masked = settings.max_tokens + 1;
  for (const [k, d] of steps.entries()) {
    assert.equal(d.step, k + 1);
    const row = d.rows[0];
    assert.equal(row.pieces.length, settings.max_tokens);
    assert.equal(row.length, settings.max_tokens);
    assert.equal(row.pieces.filter((p) => p === null).length, row.masked);
    assert.ok(row.masked < masked, 'every step commits something');
    masked = row.masked;
    assert.ok(row.committed.length > 0);
    for (const pos of row.committed) assert.notEqual(row.pieces[pos], null, 'committed positions are filled');
    assert.equal(typeof row.canvas, 'string');
  }
  assert.ok(steps[0].rows[0].masked > 0, 'the first canvas still has masks');
  assert.equal(steps.at(-1).rows[0].masked, 0, 'the last canvas has none');
});

test('stop strings cut the text and finish with "stop"', async () => {
  const m = await model();
  const prompt = await promptText();
  const whole = await client.completions.create({ model: m.id, prompt, ...settings });
  const text = whole.choices[0].text;
  if (text.length < 6) return;
  const stop = text.slice(3, 6);
  const cut = await client.completions.create({ model: m.id, prompt, ...settings, stop: [stop] });
  assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  const stream = await client.completions.create({ model: m.id, prompt, ...settings, stop, stream: true });
  let streamed = '';
  for await (const chunk of stream) for (const c of chunk.choices) streamed += c.text;
  assert.equal(streamed, cut.choices[0].text);
});

test('n: several choices, sampled with temperature', async () => {
  const m = await model();
  const prompt = await promptText();
  const r = await client.completions.create({ model: m.id, prompt, ...settings, n: 3, temperature: 1.0 });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
});

test('client errors come back as APIError with status 400 and the field', async () => {
  const m = await model();
  await assert.rejects(client.completions.create({ model: m.id, prompt: await promptText(), max_tokens: 32,
                                                   block_length: 5 }),
                       (e) => e.status === 400 && /block_length/.test(e.message));
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }),
                       (e) => e.status === 400 && e.param === 'model');
});
