// Shared by the server tests: where the server is (run.sh starts it), an OpenAI client for it, small helpers.
import OpenAI from 'openai';
import { mkdirSync } from 'node:fs';
import { spawn } from 'node:child_process';

export const URL = process.env.DLLM_URL || 'http://127.0.0.1:8080';
export const API_KEY = process.env.DLLM_API_KEY || '';
export const OUT = process.env.DLLM_TEST_OUT || new globalThis.URL('./out/', import.meta.url).pathname;
mkdirSync(OUT, { recursive: true });

export const client = new OpenAI({ baseURL: `${URL}/v1`, apiKey: API_KEY || 'none', maxRetries: 0, timeout: 120000 });

export function authHeaders(extra = {}) {
  return { 'Content-Type': 'application/json', ...(API_KEY ? { Authorization: `Bearer ${API_KEY}` } : {}), ...extra };
}

export async function post(path, body, headers = authHeaders()) {
  const res = await fetch(URL + path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

let modelCache = null;
export async function model() {
  if (!modelCache) {
    const list = await client.models.list();
    modelCache = list.data[0];
  }
  return modelCache;
}

// A prompt in the model's text: words when it has a tokenizer, token ids otherwise.
export async function promptText(words = 'The quick brown fox') {
  const m = await model();
  return m.dllm.tokenizer === 'ids' ? '12 7 99 45 3 201' : words;
}

// Reads an SSE body, calling onEvent(parsed) per data event (awaited; false cancels the stream); resolves to
// {events, done (whether [DONE] came), cancelled}.
export async function readSSE(res, onEvent = () => {}) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const events = [];
  let done = false;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += decoder.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const ev = JSON.parse(data);
        events.push(ev);
        // The callback may be async (awaited before the next event); false cancels the stream.
        if ((await onEvent(ev)) === false) { await reader.cancel(); return { events, done, cancelled: true }; }
      }
    }
  }
  return { events, done, cancelled: false };
}

// Starts another `dllm serve` on a free port (for tests that need their own limits); resolves to
// {url, proc, stop, log} (log(): its stderr so far). `model: false` leaves out run.sh's model arguments (for a
// test that serves another model).
export function startServer(args, { model = true } = {}) {
  const bin = process.env.DLLM_BIN;
  if (!bin) throw new Error('DLLM_BIN is not set (run the tests with tests/server/run.sh)');
  const base = model ? (process.env.DLLM_SERVE_ARGS || '').split(' ').filter(Boolean) : [];
  const proc = spawn(bin, ['serve', ...base, '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, DLLM_API_KEY: '' } });
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], proc, log: () => log, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGTERM'); }) });
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The text outside `spans` (code-point ranges, in order): what a canvas edit must give back unchanged.
export function outsideSpans(text, spans) {
  const chars = [...text];
  const parts = [];
  let at = 0;
  for (const s of spans) {
    parts.push(chars.slice(at, s.start).join(''));
    at = s.end;
  }
  parts.push(chars.slice(at).join(''));
  return parts;
}
