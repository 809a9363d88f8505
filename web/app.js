R"dllm_web(// Wrapped in a C++ raw string literal by its first and last lines: see src/server/web_assets.cpp.
// Sends the prompt with stream + diffusing, draws each step's canvas (docs/server.md "Diffusing events") and the
// answer text from the ordinary SSE deltas; then the answer is a document to edit in place (redo a selection,
// type over, refine: POST /v1/canvas). window.dllm exposes what the page saw (used by the browser test).
'use strict';

const $ = (id) => document.getElementById(id);
window.dllm = { model: null, canvases: [], final: '', done: false, error: null, steps: 0, edits: 0, edit: null };
// Canvas positions an edit replaced earlier in this run (LLaDA2.1 token-to-token editing).
let editedBefore = new Set();
let controller = null;

async function api(path, options = {}) {
  const headers = { 'Content-Type': 'application/json' };
  const key = $('api-key').value.trim();
  if (key) headers.Authorization = 'Bearer ' + key;
  return fetch(path, { ...options, headers });
}

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(resolve));

// Calls onData(parsed JSON) for each SSE data event of a response body, in order.
async function readEvents(res, onData) {
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
        if (data !== '[DONE]') await onData(JSON.parse(data));
      }
    }
  }
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
      // DiffusionGemma (a uniform-state canvas model): steps are per canvas (max_denoising_steps).
      if (info.canvas_length > 0) $('steps').value = info.defaults.max_denoising_steps;
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
  const info = (window.dllm.model && window.dllm.model.dllm) || {};
  if (info.canvas_length > 0) {
    // DiffusionGemma takes its own settings: steps per canvas, no blocks, a temperature schedule of its own.
    delete body.steps;
    delete body.block_length;
    delete body.temperature;
    body.max_denoising_steps = num('steps');
  } else if (num('threshold') > 0) {
    body.threshold = num('threshold');
  }
  if (chat) body.messages = [{ role: 'user', content: prompt }];
  else body.prompt = prompt;

  controller = new AbortController();
  $('run').disabled = $('redo').disabled = $('refine').disabled = true;
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
    await readEvents(res, async (chunk) => {
      onChunk(chunk, t0);
      // Show every step as its own frame, even when a fast model sends many in one network read.
      if (chunk.diffusion) await nextFrame();
    });
    window.dllm.done = true;
    setDocument(chat ? '' : prompt, window.dllm.final);
    $('state').textContent = `done in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
  } catch (e) {
    window.dllm.error = e.message;
    $('error').textContent = e.name === 'AbortError' ? 'stopped' : e.message;
    $('state').textContent = 'idle';
  } finally {
    $('run').disabled = false;
    $('redo').disabled = $('refine').disabled = doc.text === '';
    $('stop').disabled = true;
    controller = null;
  }
}

// ---- The document: the last answer, edited in place through POST /v1/canvas (docs/server.md "Canvas editing").
// Positions are code points (as the API counts them). `written` marks, per code point, the text the model wrote:
// refine may change it; what the person typed stays fixed (it is context, never a span).
const doc = { prefix: '', text: '', written: [] };
let editController = null;
const cps = (str) => [...str];
const cpLength = (str) => cps(str).length;
const cpOfUtf16 = (str, index) => cpLength(str.slice(0, index));  // a textarea's selection is in UTF-16 units

// A textarea holds no carriage return (it reads one as a line feed): the document takes each as a line feed, one
// for one, so code-point positions stay those of the model's text.
const asTyped = (str) => str.replace(/\r/g, '\n');

function setDocument(prefix, text) {
  doc.prefix = asTyped(prefix);
  doc.text = asTyped(text);
  doc.written = new Array(cpLength(text)).fill(true);
  $('doc').value = doc.text;
  $('redo').disabled = $('refine').disabled = false;
}

// The runs of model-written text: the spans a refine may touch.
function writtenRuns() {
  const runs = [];
  doc.written.forEach((w, i) => {
    if (!w) return;
    if (runs.length && runs.at(-1).end === i) runs.at(-1).end = i + 1;
    else runs.push({ start: i, end: i + 1 });
  });
  return runs;
}

// What the person typed: the changed middle between the old and the new text becomes fixed text.
$('doc').addEventListener('input', () => {
  const prev = cps(doc.text), next = cps($('doc').value);
  let a = 0;
  while (a < prev.length && a < next.length && prev[a] === next[a]) ++a;
  let b = 0;
  while (b < prev.length - a && b < next.length - a && prev[prev.length - 1 - b] === next[next.length - 1 - b]) ++b;
  doc.written = [...doc.written.slice(0, a), ...new Array(next.length - a - b).fill(false),
                 ...doc.written.slice(prev.length - b)];
  doc.text = next.join('');
  if (editController) editController.abort();  // the document changed under a running edit: keep the person's text
});

// The document as the latest canvas event shows it: text outside the spans as is, each span's tokens drawn
// like the generation canvas (masks, this step's commits, a round's edits).
function drawDocument(d) {
  const chars = cps(d.text);
  const frag = document.createDocumentFragment();
  let at = cpLength(doc.prefix);
  for (const s of d.spans) {
    frag.appendChild(document.createTextNode(chars.slice(at, s.start).join('')));
    const fresh = new Set(s.committed || []), edits = new Set(s.edited || []);
    s.pieces.forEach((piece, i) => {
      const span = document.createElement('span');
      if (piece === null) {
        span.className = 'mask';
        span.textContent = '░';
      } else {
        span.className = 'tok span' + (edits.has(i) ? ' edit' : fresh.has(i) ? ' new' : '');
        span.textContent = piece;
      }
      frag.appendChild(span);
    });
    at = s.end;
  }
  frag.appendChild(document.createTextNode(chars.slice(at).join('')));
  $('canvas').replaceChildren(frag);
}

// Takes a canvas text whose spans hold no mask into the document: text outside the spans keeps its flags, the
// spans' new text is the model's. `spans` are the request's spans as they stand in the document now.
function applyDocument(text, newSpans, spans) {
  const off = cpLength(doc.prefix);
  const written = [];
  let at = 0;
  newSpans.forEach((s, k) => {
    written.push(...doc.written.slice(at, spans[k].start));
    written.push(...new Array(s.end - s.start).fill(true));
    at = spans[k].end;
  });
  written.push(...doc.written.slice(at));
  const el = $('doc');
  const [selStart, selEnd] = [el.selectionStart, el.selectionEnd];
  doc.text = asTyped(cps(text).slice(off).join(''));
  doc.written = written;
  el.value = doc.text;
  el.setSelectionRange(selStart, selEnd);
  return newSpans.map((s) => ({ start: s.start - off, end: s.end - off }));
}

let editCount = 0;  // seeds each edit differently, so a redo at temperature > 0 draws a new text
async function editDocument(kind, spans, extra = {}) {
  const off = cpLength(doc.prefix);
  const num = (id) => Number($(id).value);
  const body = {
    model: window.dllm.model ? window.dllm.model.id : undefined,
    text: doc.prefix + doc.text,
    spans: spans.map((s) => ({ start: s.start + off, end: s.end + off })),
    temperature: num('temperature'),
    seed: num('seed') + ++editCount,
    stream: true,
    ...extra,
  };
  const state = { kind, running: true, done: false, error: null, request: body, chunks: [], changes: 0,
                  refine: [], final: null };
  window.dllm.edit = state;
  $('error').textContent = '';
  $('run').disabled = $('redo').disabled = $('refine').disabled = true;
  $('stop').disabled = false;
  $('doc-state').textContent = kind === 'redo' ? 'redoing the selection…' : 'refining…';
  editController = new AbortController();
  const controllerOfThisEdit = editController;
  editedBefore = new Set();
  try {
    const res = await fetch('/v1/canvas', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json',
                 ...($('api-key').value ? { Authorization: 'Bearer ' + $('api-key').value.trim() } : {}) },
      body: JSON.stringify(body),
      signal: editController.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error(err.error ? err.error.message : res.statusText);
    }
    let current = spans;  // the request's spans where they stand in the document now
    await readEvents(res, async (ev) => {
      if (ev.error) throw new Error(ev.error.message);
      if (ev.object === 'canvas.chunk') {
        const d = ev.dllm;
        const masked = d.spans.reduce((n, s) => n + s.masked, 0);
        const edited = d.spans.reduce((n, s) => n + (s.edited || []).length, 0);
        state.chunks.push({ round: d.round, step: d.step, masked, edited, text: d.text });
        state.changes += edited;
        drawDocument(d);
        $('step').textContent = d.step;
        $('block').textContent = d.round;
        $('edits').textContent = state.changes;
        $('canvas').dataset.step = d.step;
        // A step that leaves no mask (the fill's last, a round's last) is a whole document: show it in the editor.
        if (masked === 0) current = applyDocument(d.text, d.spans, current);
        await nextFrame();
      } else if (ev.object === 'canvas') {
        state.final = ev;
        state.refine = ev.refine;
        applyDocument(ev.text, ev.spans, current);
      }
    });
    state.done = true;
    const rounds = state.refine.length;
    $('doc-state').textContent = `${kind} done: ${state.chunks.length} steps` +
                                 (rounds ? `, ${rounds} refine rounds changed ${state.changes} tokens` : '');
  } catch (e) {
    state.error = e.message;
    $('doc-state').textContent = e.name === 'AbortError' ? 'stopped (the document keeps what was applied)' : '';
    if (e.name !== 'AbortError') $('error').textContent = e.message;
  } finally {
    state.running = false;
    if (editController === controllerOfThisEdit) editController = null;
    $('run').disabled = $('redo').disabled = $('refine').disabled = false;
    $('stop').disabled = true;
  }
}

$('redo').addEventListener('click', () => {
  const el = $('doc');
  const start = cpOfUtf16(el.value, el.selectionStart), end = cpOfUtf16(el.value, el.selectionEnd);
  if (end <= start) {
    $('error').textContent = 'select the text to redo in the document first';
    return;
  }
  editDocument('redo', [{ start, end }]);
});
$('refine').addEventListener('click', () => {
  const runs = writtenRuns();
  if (!runs.length) {
    $('error').textContent = 'nothing the model wrote is left to refine (typed text stays fixed)';
    return;
  }
  editDocument('refine', runs, { mode: 'refine', refine: Number($('refine-rounds').value),
                                 refine_tokens: Number($('refine-tokens').value) });
});

$('run').addEventListener('click', run);
$('stop').addEventListener('click', () => {
  if (controller) controller.abort();
  if (editController) editController.abort();
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) run();
});
$('api-key').addEventListener('input', loadModel);
loadModel();
)dllm_web"
