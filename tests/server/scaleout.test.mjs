// Scale-out behind nginx (deploy/nginx.conf, scripts/scale_out.sh): two replicas behind Debian's nginx, the
// official openai client through nginx; one replica is killed (SIGKILL) mid-run while each replica streams an
// answer. The stream on the survivor completes, and every new request is answered (nginx moves on from the dead
// replica). Skips where nginx is not installed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { OUT, sleep } from './common.mjs';

const NGINX = process.env.NGINX || '/usr/sbin/nginx';
const script = fileURLToPath(new globalThis.URL('../../scripts/scale_out.sh', import.meta.url));
const LONG = { prompt: '12 7 99 45 3 201', max_tokens: 480, steps: 480, temperature: 0 };

function startScaleOut(args) {
  const proc = spawn('bash', [script, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NGINX, DLLM_API_KEY: '' },
  });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`scale_out.sh did not start:\n${out}`)), 90000);
    const onData = (d) => {
      out += d;
      const m = /nginx listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        const replicas = [...out.matchAll(/replica (\d+) pid (\d+) port (\d+)/g)]
          .map((r) => ({ pid: Number(r[2]), url: `http://127.0.0.1:${r[3]}` }));
        resolve({ url: m[1], proc, replicas, output: () => out });
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`scale_out.sh exited with ${code}:\n${out}`)));
  });
}

async function* sse(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      for (const line of block.split('\n')) if (line.startsWith('data: ')) yield line.slice(6);
    }
  }
}

test('nginx in front of 2 replicas: one killed mid-run, streams on the other complete, new requests answered',
  { timeout: 180000 }, async (t) => {
    if (!existsSync(NGINX)) return t.skip(`${NGINX} is not installed (apt-get install nginx)`);
    const base = 21000 + Math.floor(Math.random() * 20000);
    const serveArgs = (process.env.DLLM_SERVE_ARGS || '').split(' ').filter(Boolean);
    const lb = await startScaleOut(['-k', '2', '-p', String(base), '-b', String(base + 1), '--', ...serveArgs]);
    try {
      assert.equal(lb.replicas.length, 2);
      const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
      const warm = await client.completions.create({ model: (await client.models.list()).data[0].id,
                                                     prompt: '1 2 3', max_tokens: 8 });
      assert.ok(warm.choices[0].text !== undefined);

      // One long stream per replica (least connections spreads them).
      const streams = await Promise.all([0, 1].map(() => fetch(`${lb.url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...LONG, stream: true, diffusing: true }) })));
      const readers = streams.map((res) => sse(res));
      for (const r of readers) assert.ok(!(await r.next()).done, 'each stream started');
      const busy = await Promise.all(lb.replicas.map(async (r) => (await (await fetch(`${r.url}/health`)).json())
        .active_requests));
      assert.deepEqual(busy, [1, 1], 'one stream on each replica');

      // Kill replica 0 outright.
      const t0 = Date.now();
      process.kill(lb.replicas[0].pid, 'SIGKILL');
      const outcomes = await Promise.all(readers.map(async (r) => {
        let done = false, error = null;
        try {
          for await (const data of r) {
            if (data === '[DONE]') done = true;
            else if (JSON.parse(data).error) error = JSON.parse(data).error;
          }
        } catch (e) {
          error = e.message;
        }
        return { done, error };
      }));
      const completed = outcomes.filter((o) => o.done && !o.error).length;
      assert.equal(completed, 1, `the survivor's stream completes: ${JSON.stringify(outcomes)}`);

      // New requests keep being answered, the first ones included (nginx retries the dead replica's).
      const model = (await client.models.list()).data[0].id;
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) =>
        client.completions.create({ model, prompt: `${i + 1} 2 3`, max_tokens: 16 })));
      assert.equal(answers.filter((a) => a.choices.length === 1).length, 6);
      const streamed = await client.completions.create({ model, prompt: '4 5 6', max_tokens: 16, stream: true });
      let text = '';
      for await (const chunk of streamed) text += chunk.choices[0]?.text || '';
      assert.equal(typeof text, 'string');
      console.log(`scale-out: replica killed; survivor stream completed; 6 + 1 new requests answered in ` +
                  `${Date.now() - t0} ms after the kill (nginx log in ${OUT})`);
    } finally {
      lb.proc.kill('SIGTERM');
      await new Promise((r) => (lb.proc.exitCode !== null ? r() : lb.proc.on('exit', r)));
    }
  });
