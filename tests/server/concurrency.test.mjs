// Many clients at once: every answer complete and equal to the same request served alone, clients that leave
// mid-stream cancel their work, a full queue answers 429, and the server keeps serving.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { URL, OUT, authHeaders, post, promptText, readSSE, startServer, sleep } from './common.mjs';

const settings = { max_tokens: 32, steps: 32, block_length: 16 };

// A metric summed over its series (each served model has its own: {model="..."}).
async function metric(name) {
  const text = await (await fetch(`${URL}/metrics`, { headers: authHeaders() })).text();
  const lines = [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))];
  return lines.length ? lines.reduce((sum, m) => sum + Number(m[1]), 0) : NaN;
}

test('concurrent clients, some disconnecting mid-stream', async () => {
  const prompt = await promptText();
  const seeds = [0, 1, 2, 3, 4, 5, 6, 7];
  // Each request alone first: the reference answers, and the sequential throughput.
  const ref = {};
  let t0 = performance.now();
  let tokens = 0;
  for (const seed of seeds) {
    const r = await post('/v1/completions', { prompt, ...settings, seed, temperature: 0.7 });
    assert.equal(r.status, 200, r.text);
    ref[seed] = r.json.choices[0].text;
    tokens += settings.max_tokens;
  }
  const sequentialSecs = (performance.now() - t0) / 1000;
  const cancelledBefore = await metric('dllm_cancelled_total');

  t0 = performance.now();
  const complete = seeds.map(async (seed) => {
    const res = await fetch(`${URL}/v1/completions`, {
      method: 'POST', headers: authHeaders(),
      body: JSON.stringify({ prompt, ...settings, seed, temperature: 0.7, stream: true, diffusing: seed % 2 === 0 }),
    });
    assert.equal(res.status, 200);
    const { events, done } = await readSSE(res);
    assert.ok(done, `seed ${seed}: stream ended with [DONE]`);
    const text = events.flatMap((e) => e.choices).map((c) => c.text).join('');
    const finish = events.flatMap((e) => e.choices).map((c) => c.finish_reason).filter(Boolean);
    assert.equal(finish.length, 1, `seed ${seed}: one finish_reason`);
    return { seed, text };
  });
  // Clients that leave after the first canvas, with long generations that would otherwise keep the batch busy.
  const leaving = [100, 101, 102].map(async (seed) => {
    const controller = new AbortController();
    const res = await fetch(`${URL}/v1/completions`, {
      method: 'POST', headers: authHeaders(), signal: controller.signal,
      body: JSON.stringify({ prompt, max_tokens: 256, steps: 256, seed, stream: true, diffusing: true }),
    });
    const reader = res.body.getReader();
    await reader.read();
    controller.abort();
    return seed;
  });
  const answers = await Promise.all(complete);
  await Promise.allSettled(leaving);
  const concurrentSecs = (performance.now() - t0) / 1000;
  for (const { seed, text } of answers) assert.equal(text, ref[seed], `seed ${seed}: same text as alone`);

  // The server noticed the departures and stopped their work.
  let cancelled = cancelledBefore;
  for (let i = 0; i < 50 && cancelled < cancelledBefore + 3; i++) {
    await sleep(100);
    cancelled = await metric('dllm_cancelled_total');
  }
  assert.ok(cancelled >= cancelledBefore + 3, `cancelled ${cancelled - cancelledBefore} of 3`);
  const h = await (await fetch(`${URL}/health`)).json();
  assert.equal(h.status, 'ok');
  // Cold start: the load, then the first request's first token, both measured once requests have run.
  const cold = h.models[0].cold_start;
  assert.ok(cold.load_seconds > 0, JSON.stringify(cold));
  assert.equal(cold.weights_prepared, 1, JSON.stringify(cold));
  assert.ok(cold.first_request_first_token_seconds > 0, JSON.stringify(cold));
  assert.ok(Math.abs(cold.load_to_first_token_seconds - cold.load_seconds -
                     cold.first_request_first_token_seconds) < 1e-9, JSON.stringify(cold));

  const result = {
    requests: seeds.length, tokens_per_request: settings.max_tokens,
    sequential_seconds: sequentialSecs, sequential_tokens_per_s: tokens / sequentialSecs,
    concurrent_seconds: concurrentSecs, concurrent_tokens_per_s: tokens / concurrentSecs,
    speedup: sequentialSecs / concurrentSecs,
    note: 'concurrent time includes 3 extra clients that disconnect after their first canvas',
  };
  writeFileSync(join(OUT, 'throughput.json'), JSON.stringify(result, null, 2) + '\n');
  console.log('throughput', JSON.stringify(result));
});

test('a full queue answers 429 and the server keeps serving', async () => {
  const server = await startServer(['--max-queue', '1', '--max-batch', '1']);
  try {
    const prompt = await promptText();
    const body = JSON.stringify({ prompt, max_tokens: 128, steps: 128 });
    const statuses = await Promise.all(Array.from({ length: 6 }, async () => {
      const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', body,
                                                                headers: { 'Content-Type': 'application/json' } });
      const json = JSON.parse(await res.text());
      if (res.status === 429) {
        assert.match(json.error.message, /queue is full/);
        assert.ok(Number(res.headers.get('retry-after')) >= 1, 'a 429 says when to retry (Retry-After)');
      } else assert.ok(json.choices, JSON.stringify(json));
      return res.status;
    }));
    assert.ok(statuses.includes(429), `statuses ${statuses}`);
    assert.ok(statuses.includes(200), `statuses ${statuses}`);
    const again = await fetch(`${server.url}/v1/completions`, { method: 'POST', body,
                                                                 headers: { 'Content-Type': 'application/json' } });
    assert.equal(again.status, 200);
  } finally {
    await server.stop();
  }
});
