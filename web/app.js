R"dllm_web(// Wrapped in a C++ raw string literal by its first and last lines: see src/server/web_assets.cpp.
// Sends the prompt with stream + diffusing, draws each step's canvas (docs/server.md "Diffusing events") and the
// answer text from the ordinary SSE deltas. window.dllm exposes what the page saw (used by the browser test).
'use strict';

const $ = (id) => document.getElementById(id);
window.dllm = { model: null, canvases: [], final: '', done: false, error: null, steps: 0, edits: 0 };
// Canvas positions an edit replaced earlier in this run (LLaDA2.1 token-to-token editing).
let editedBefore = new Set();
let controller = null;

async function api(path, options = {}) {
  const headers = { 'Content-Type': 'application/json' };
  const key = $('api-key').value.trim();
  if (key) headers.Authorization = 'Bearer ' + key;
  return fetch(path, { ...options, headers });
}

async function loadModel() {
  try {
    const res = await api('/v1/models');
    const body = await res.json();
    if (!res.ok) throw new Error(body.error ? body.error.message : res.statusText);
    // The page draws the denoising: the first diffusion model (a server may also serve autoregressive ones).
    const m = body.data.find((d) => d.dllm && d.dllm.kind === 'diffusion') || body.data[0];
    window.dllm.model = m;
    const info = m.dllm || {};
    $('model-name').textContent = `${m.id} · ${info.architecture} · tokenizer: ${info.tokenizer}`;
    if (!info.chat_template) {
      $('mode').value = 'completion';
      $('mode').querySelector('option[value=chat]').disabled = true;
    }
    if (info.defaults) {
      // Block-diffusion models (LLaDA2.x, SDAR): steps and block length are per block, default the model's.
      const block = info.block_size > 0 ? info.block_size : 0;
      $('gen-length').value = info.defaults.max_tokens;
      $('steps').value = info.defaults.steps || block || info.defaults.max_tokens;
      $('block-length').value = info.defaults.block_length || block || info.defaults.max_tokens;
    }
  } catch (e) {
    $('model-name').textContent = 'model: ' + e.message;
  }
}

// Committed in this step: 'new'; replaced by an edit in this step: 'edit' (not a fresh commit); replaced by an
// edit earlier: 'edited'; past the final prefix (LLaDA2.1 may still edit it): 'open'.
function drawCanvas(row) {
  const fresh = new Set(row.committed);
  const edits = new Set(row.edited || []);
  const final = row.final === undefined ? row.length : row.final;
  const box = $('canvas');
  const frag = document.createDocumentFragment();
  row.pieces.forEach((piece, i) => {
    const span = document.createElement('span');
    if (piece === null) {
      span.className = 'mask';
      span.textContent = '░';
    } else {
      span.className = edits.has(i) ? 'tok edit' : fresh.has(i) ? 'tok new' : editedBefore.has(i) ? 'tok edited' : 'tok';
      if (i >= final) span.classList.add('open');
      span.textContent = piece;
    }
    frag.appendChild(span);
  });
  box.replaceChildren(frag);
  for (const i of edits) editedBefore.add(i);
}

function onChunk(chunk, t0) {
  if (chunk.error) throw new Error(chunk.error.message);
  if (chunk.diffusion) {
    const d = chunk.diffusion;
    const row = d.rows[0];
    window.dllm.canvases.push(row.canvas);
    window.dllm.steps = d.step;
    window.dllm.edits += (row.edited || []).length;
    drawCanvas(row);
    $('edits').textContent = window.dllm.edits;
    const done = row.length - row.masked;
    $('step').textContent = d.step;
    $('block').textContent = d.block;
    $('committed').textContent = done;
    $('length').textContent = row.length;
    const secs = Math.max(d.elapsed_ms, 1) / 1000;
    $('tps').textContent = (done / secs).toFixed(1);
    $('canvas').dataset.step = d.step;
  }
  for (const c of chunk.choices || []) {
    const text = c.delta ? c.delta.content : c.text;
    if (text) {
      window.dllm.final += text;
      $('final').textContent = window.dllm.final;
    }
  }
}

async function run() {
  const prompt = $('prompt').value;
  $('error').textContent = '';
  $('final').textContent = '';
  $('canvas').replaceChildren();
  Object.assign(window.dllm, { canvases: [], final: '', done: false, error: null, steps: 0, edits: 0 });
  editedBefore = new Set();
  $('edits').textContent = 0;
  const chat = $('mode').value === 'chat';
  const num = (id) => Number($(id).value);
  const body = {
    model: window.dllm.model ? window.dllm.model.id : undefined,
    max_tokens: num('gen-length'),
    steps: num('steps'),
    block_length: num('block-length'),
    temperature: num('temperature'),
    seed: num('seed'),
    stream: true,
    diffusing: true,
  };
  if (num('threshold') > 0) body.threshold = num('threshold');
  if (chat) body.messages = [{ role: 'user', content: prompt }];
  else body.prompt = prompt;

  controller = new AbortController();
  $('run').disabled = true;
  $('stop').disabled = false;
  $('state').textContent = 'denoising…';
  const t0 = performance.now();
  try {
    const res = await fetch(chat ? '/v1/chat/completions' : '/v1/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json',
                 ...($('api-key').value ? { Authorization: 'Bearer ' + $('api-key').value.trim() } : {}) },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error(err.error ? err.error.message : res.statusText);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let at;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, at);
        buf = buf.slice(at + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue;  // ':' lines are keep-alives
          const data = line.slice(6);
          if (data === '[DONE]') continue;
          const chunk = JSON.parse(data);
          onChunk(chunk, t0);
          // Show every step as its own frame, even when a fast model sends many in one network read.
          if (chunk.diffusion) await new Promise((resolve) => requestAnimationFrame(resolve));
        }
      }
    }
    window.dllm.done = true;
    $('state').textContent = `done in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
  } catch (e) {
    window.dllm.error = e.message;
    $('error').textContent = e.name === 'AbortError' ? 'stopped' : e.message;
    $('state').textContent = 'idle';
  } finally {
    $('run').disabled = false;
    $('stop').disabled = true;
    controller = null;
  }
}

$('run').addEventListener('click', run);
$('stop').addEventListener('click', () => controller && controller.abort());
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) run();
});
$('api-key').addEventListener('input', loadModel);
loadModel();
)dllm_web"
