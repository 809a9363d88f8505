// Soak test: `dllm serve` under N concurrent clients for T minutes with a mix of streamed and plain requests,
// completions and chat (when the model has a chat template), random client disconnects mid-stream and random
// cancels (aborted before the answer). Every request that was not cancelled must end with a complete answer or a
// clean 4xx/429 (after a 429 the client waits the Retry-After the server sent); the server's resident memory
// is sampled every 10 s (the slope after warm-up is reported), and latency and queue time percentiles are
// printed as JSON.
//
//   node tests/soak/soak.mjs --bin build/dllm [--clients 16] [--minutes 30] [--out FILE.json] [-- SERVE_ARGS...]
//
// Without SERVE_ARGS it serves the tiny test model with the tiny tokenizer (tests/server/run.sh's setup).
// Exits 1 on a lost answer, a 5xx, or a server that died. Needs tests/server/node_modules (npm ci there).
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = fileURLToPath(new URL('.', import.meta.url));
const require = createRequire(`${here}../server/package.json`);
const OpenAI = require('openai').default || require('openai');

const args = process.argv.slice(2);
const dash = args.indexOf('--');
const own = dash >= 0 ? args.slice(0, dash) : args;
const opt = (name, def) => (own.includes(name) ? own[own.indexOf(name) + 1] : def);
const bin = opt('--bin', `${here}../../build/dllm`);
const clients = Number(opt('--clients', 16));
const minutes = Number(opt('--minutes', 30));
const outFile = opt('--out', '');
const serveArgs = dash >= 0 ? args.slice(dash + 1)
  : ['-m', `${here}../data/oracle/models/llada_tiny_f32`, '--dtype', 'f32', '--tokenizer',
     `${here}../server/fixtures/tiny_tokenizer`, '--gen-length', '32', '--max-tokens', '256', '--max-queue', '8'];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const server = spawn(bin, ['serve', ...serveArgs, '--port', '0', '-q'], { stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
server.stderr.on('data', (d) => { log += d; });
const url = await new Promise((resolve, reject) => {
  const t = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
  const poll = setInterval(() => {
    const m = /listening on (http:\/\/[^\s]+)/.exec(log);
    if (m) { clearTimeout(t); clearInterval(poll); resolve(m[1]); }
  }, 50);
  server.on('exit', (c) => reject(new Error(`server exited with ${c}:\n${log}`)));
});
let serverDied = false;
server.on('exit', () => { serverDied = true; });

const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 600000 });
const model = (await client.models.list()).data[0];
const chat = Boolean(model.dllm.chat_template);
const prompt = model.dllm.tokenizer === 'ids' ? '12 7 99 45 3 201' : 'The quick brown fox';

function rssKiB() {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}
const memory = [];  // [seconds since start, RSS KiB]
const t0 = Date.now();
const sampler = setInterval(() => { if (!serverDied) memory.push([(Date.now() - t0) / 1000, rssKiB()]); }, 10000);
memory.push([0, rssKiB()]);

const counts = { ok: 0, rejected: 0, cancelled: 0, disconnected: 0, lost: 0, server_errors: 0, backoff_seconds: 0 };
const latency = [], queue = [];
const failures = [];
const deadline = t0 + minutes * 60000;

async function one(rng, probe = {}) {
  const streamed = rng() < 0.5, useChat = chat && rng() < 0.5;
  probe.streamed = streamed;
  const max_tokens = [8, 16, 32, 64][Math.floor(rng() * 4)];
  const body = { model: model.id, max_tokens, ...(rng() < 0.3 ? { temperature: 0.8, seed: Math.floor(rng() * 1e6) } : {}) };
  if (useChat) body.messages = [{ role: 'user', content: prompt }];
  else body.prompt = prompt;
  const fate = rng();  // < 0.1: cancel before the answer; < 0.2 (streams): disconnect mid-stream
  probe.fate = fate < 0.1 ? 'cancel' : fate < 0.2 && streamed ? 'disconnect' : 'complete';
  const controller = new AbortController();
  const start = Date.now();
  try {
    if (fate < 0.1) setTimeout(() => controller.abort(), Math.floor(rng() * 200));
    const create = useChat ? client.chat.completions : client.completions;
    if (!streamed) {
      probe.phase = 'request';
      const r = await create.create(body, { signal: controller.signal });
      const text = useChat ? r.choices[0].message.content : r.choices[0].text;
      if (typeof text !== 'string' || !r.choices[0].finish_reason) throw new Error(`incomplete answer ${JSON.stringify(r)}`);
      queue.push(r.dllm?.queue_seconds ?? 0);
    } else {
      probe.phase = 'stream open';
      const stream = await create.create({ ...body, stream: true, stream_options: { include_usage: true } },
                                         { signal: controller.signal });
      probe.phase = 'streaming';
      let finish = null, chunks = 0;
      for await (const chunk of stream) {
        ++chunks;
        if (fate >= 0.1 && fate < 0.2 && chunks === 2) {
          controller.abort();  // the client goes away mid-stream
          counts.disconnected++;
          return;
        }
        for (const c of chunk.choices || []) if (c.finish_reason) finish = c.finish_reason;
      }
      if (!finish) throw new Error('a stream ended without finish_reason');
    }
    counts.ok++;
    latency.push((Date.now() - start) / 1000);
  } catch (e) {
    if (controller.signal.aborted || e.name === 'APIUserAbortError' || /abort/i.test(e.message)) { counts.cancelled++; return; }
    if (e.status === 429) {  // a full queue: back off as the server asks (Retry-After, seconds)
      counts.rejected++;
      const after = Number(e.headers?.['retry-after'] ?? e.headers?.get?.('retry-after'));
      probe.retryAfter = Number.isFinite(after) && after > 0 ? Math.min(after, 30) : 1;
      return;
    }
    if (e.status >= 400 && e.status < 500) { counts.rejected++; return; }
    if (e.status >= 500) counts.server_errors++;
    else counts.lost++;
    failures.push(String(e.message).slice(0, 300));
  }
}

function rngOf(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}
// A request that has not settled 120 s after it started is reported as hung (client side: the server's view
// is in /metrics), and its client moves on; the report says which kind of request it was.
const hung = [];
await Promise.all(Array.from({ length: clients }, async (_, i) => {
  const rng = rngOf(i + 1);
  while (Date.now() < deadline && !serverDied) {
    const probe = { streamed: null, fate: null, phase: 'start' };
    let timer;
    const watchdog = new Promise((resolve) => { timer = setTimeout(() => resolve('hung'), 120000); });
    if (await Promise.race([one(rng, probe), watchdog]) === 'hung') hung.push(probe);
    clearTimeout(timer);
    if (probe.retryAfter) { counts.backoff_seconds += probe.retryAfter; await sleep(probe.retryAfter * 1000); }
  }
}));
clearInterval(sampler);
if (!serverDied) memory.push([(Date.now() - t0) / 1000, rssKiB()]);

// Memory slope after warm-up (the first third), least squares, KiB per minute.
const warm = memory.filter(([t]) => t >= (minutes * 60) / 3);
let slope = null;
if (warm.length >= 2) {
  const n = warm.length, mt = warm.reduce((a, [t]) => a + t, 0) / n, mr = warm.reduce((a, [, r]) => a + r, 0) / n;
  const cov = warm.reduce((a, [t, r]) => a + (t - mt) * (r - mr), 0), vt = warm.reduce((a, [t]) => a + (t - mt) ** 2, 0);
  slope = vt > 0 ? (cov / vt) * 60 : 0;
}
const metrics = serverDied ? '' : await (await fetch(`${url}/metrics`)).text();
const report = {
  clients, minutes, serve_args: serveArgs, counts, failures: failures.slice(0, 10), client_hangs: hung,
  latency_seconds: { p50: pct(latency, 50), p99: pct(latency, 99), n: latency.length },
  queue_seconds: { p50: pct(queue, 50), p99: pct(queue, 99), n: queue.length },
  rss_kib: { start: memory[0][1], end: memory.at(-1)[1], max: Math.max(...memory.map(([, r]) => r)),
             slope_kib_per_minute_after_warmup: slope, samples: memory },
  server_alive: !serverDied,
  metrics_cancelled: Number(/dllm_cancelled_total\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? NaN),
};
if (outFile) writeFileSync(outFile, JSON.stringify(report, null, 2));
const { samples, ...rss } = report.rss_kib;
console.log(JSON.stringify({ ...report, rss_kib: rss }, null, 2));
// A hung request the client meant to complete is a lost answer; one it aborted itself is reported only.
const bad = serverDied || counts.lost > 0 || counts.server_errors > 0 || counts.ok === 0 ||
  hung.some((h) => h.fate === 'complete');
server.kill('SIGTERM');  // drains: the process ends once its requests have
await new Promise((r) => (server.exitCode !== null ? r() : server.on('exit', r)));
process.exit(bad ? 1 : 0);
