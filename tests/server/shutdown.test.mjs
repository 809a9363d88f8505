// Graceful shutdown and deadlines, each on its own `dllm serve`: SIGTERM drains (the stream in flight completes,
// new requests answer 503 with Retry-After, /health says "draining", the process exits 0); a drain that runs
// out of --drain-seconds ends the request with a 503 error; --request-timeout ends a long request with a 504
// error and counts it in /metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readSSE, startServer, sleep } from './common.mjs';

// A long generation on the tiny model: one token per step over a long canvas.
const LONG = { prompt: '12 7 99 45 3 201', max_tokens: 480, steps: 480, temperature: 0 };

async function post(server, path, body) {
  return fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                    body: JSON.stringify(body) });
}

const exited = (proc) => new Promise((resolve) => {
  if (proc.exitCode !== null) resolve(proc.exitCode);
  else proc.on('exit', (code) => resolve(code));
});

// (--drain-seconds well above the request's time, which is ~1 s in a Release build and a minute under TSan.)
test('SIGTERM drains: the stream in flight completes, new requests get 503, then exit 0', { timeout: 400000 },
  async () => {
    const server = await startServer(['--drain-seconds', '300']);
    const exit = exited(server.proc);
    const res = await post(server, '/v1/completions', { ...LONG, stream: true, diffusing: true });
    assert.equal(res.status, 200);
    let signalled = false, health = null, refused = null;
    const { events, done } = await readSSE(res, async (ev) => {
      if (signalled || !ev.diffusion) return;
      signalled = true;
      server.proc.kill('SIGTERM');
      await sleep(300);  // the lifecycle thread polls every 100 ms
      const h = await fetch(server.url + '/health');
      health = { status: h.status, body: await h.json() };
      const r = await post(server, '/v1/completions', { prompt: '1 2', max_tokens: 4 });
      refused = { status: r.status, retry: r.headers.get('retry-after'), body: await r.json() };
    });
    assert.ok(signalled, 'the stream sent steps');
    assert.equal(health.status, 503);
    assert.equal(health.body.status, 'draining');
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error.code, 'server_draining');
    assert.ok(Number(refused.retry) > 0, 'Retry-After on the refusal');
    assert.ok(done, 'the stream in flight ended with [DONE]');
    assert.ok(!events.some((e) => e.error), 'and without an error');
    const last = events.filter((e) => e.choices && e.choices.some((c) => c.finish_reason)).at(-1);
    assert.ok(last, 'a finish_reason came');
    assert.equal(await exit, 0, 'exit status 0 after the drain');
    assert.match(server.log(), /draining/);
    assert.match(server.log(), /drained/);
  });

test('a drain that runs out of --drain-seconds ends the request with a 503 error; exit 0', { timeout: 120000 },
  async () => {
    const server = await startServer(['--drain-seconds', '0.2']);
    const exit = exited(server.proc);
    const res = await post(server, '/v1/completions', { ...LONG, max_tokens: 512, steps: 512, stream: true,
                                                        diffusing: true });
    let signalled = false;
    const { events, done } = await readSSE(res, async (ev) => {
      if (!signalled && ev.diffusion) {
        signalled = true;
        server.proc.kill('SIGTERM');
      }
    });
    const err = events.find((e) => e.error);
    assert.ok(err, 'an error event');
    assert.equal(err.error.code, 'server_draining');
    assert.ok(done);
    assert.equal(await exit, 0);
  });

test('--request-timeout ends a long request with a 504 error, counted in /metrics', { timeout: 120000 }, async () => {
  const server = await startServer(['--request-timeout', '0.2']);
  try {
    const plain = await post(server, '/v1/completions', { ...LONG, max_tokens: 512, steps: 512 });
    const body = JSON.parse(await plain.text());
    assert.equal(body.error.code, 'request_timeout', JSON.stringify(body));
    assert.match(body.error.message, /--request-timeout/);
    const streamed = await post(server, '/v1/completions', { ...LONG, max_tokens: 512, steps: 512, stream: true });
    const { events, done } = await readSSE(streamed);
    assert.equal(events.find((e) => e.error).error.code, 'request_timeout');
    assert.ok(done);
    // A short request is untouched.
    const ok = await post(server, '/v1/completions', { prompt: '1 2', max_tokens: 4 });
    assert.equal(ok.status, 200);
    assert.ok((await ok.json()).choices);
    const metrics = await (await fetch(server.url + '/metrics')).text();
    assert.match(metrics, /dllm_requests_timed_out_total 2/);
    assert.match(metrics, /dllm_requests_total\{endpoint="\/v1\/completions",status="504"\} 2/);
    assert.match(metrics, /dllm_draining 0/);
  } finally {
    await server.stop();
  }
});
