// llama-bench's pp / tg numbers for a GGUF, measured with llama.cpp itself through node-llama-cpp's prebuilt
// binaries (npm; no llama.cpp build here). pp: a fresh prompt of --pp random tokens in one batch; tg: --tg
// tokens after a one-token prompt, one llama_decode each, no sampling (as llama-bench). Medians of --repeat.
//
//   NODE_PATH=DIR/node_modules node bench/peer/llama_cpp_bench.mjs MODEL.gguf [--pp 256] [--tg 64] \
//       [--repeat 5] [--threads 2]
// prints one JSON line. DIR holds `npm i -E node-llama-cpp@3.21.1` (bench/peer/run.sh installs it).
import {createRequire} from "node:module";
import path from "node:path";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const modelPath = args[0];
if (!modelPath || modelPath.startsWith("--")) {
  console.error("usage: llama_cpp_bench.mjs MODEL.gguf [--pp 256] [--tg 64] [--repeat 5] [--threads 2]");
  process.exit(2);
}
const pp = opt("--pp", 256), tg = opt("--tg", 64), repeat = opt("--repeat", 5), threads = opt("--threads", 2);
const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), "x.js"));
const {getLlama} = await import(require.resolve("node-llama-cpp"));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: pp + tg + 16, batchSize: Math.max(pp, 512), threads,
                                           sequences: 1});
const sequence = context.getSequence();
let seed = 1;  // token ids in [100, 1100): speed does not depend on them
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 1000 + 100;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timePrompt() {
  await sequence.clearHistory();
  const tokens = Array.from({length: pp}, rand);
  const t0 = performance.now();
  await sequence.evaluateWithoutGeneratingNewTokens(tokens);
  return (performance.now() - t0) / 1000;
}
async function timeGeneration() {
  await sequence.clearHistory();
  await sequence.evaluateWithoutGeneratingNewTokens([rand()]);
  const t0 = performance.now();
  for (let i = 0; i < tg; ++i) await sequence.evaluateWithoutGeneratingNewTokens([rand()]);
  return (performance.now() - t0) / 1000;
}
await timePrompt();  // warm-up (page cache, thread pool)
const ppSec = [], tgSec = [];
for (let r = 0; r < repeat; ++r) ppSec.push(await timePrompt());
for (let r = 0; r < repeat; ++r) tgSec.push(await timeGeneration());
// the CPU backend variant ggml picked for this CPU (GGML_BACKEND_DL: one libggml-cpu-<arch>.so per ISA level)
const fs = await import("node:fs");
const variant = [...new Set(fs.readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-[\w-]+\.so/g) || [])];
console.log(JSON.stringify({
  engine: "llama.cpp via node-llama-cpp", cpu_backend: variant, model: modelPath, threads, pp, tg, repeat,
  pp_tokens_per_second: pp / median(ppSec), tg_tokens_per_second: tg / median(tgSec),
  pp_seconds: ppSec, tg_seconds: tgSec,
}));
await context.dispose();
await model.dispose();
