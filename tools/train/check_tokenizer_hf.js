// Encode samples with the official Hugging Face `tokenizers` library (Node binding) for check_tokenizer.py.
// Usage: NODE_PATH=/tmp/tokcheck/node_modules node check_tokenizer_hf.js tokenizer.json samples.json out.json
// (install the binding OUTSIDE the repo: mkdir -p /tmp/tokcheck && cd /tmp/tokcheck && npm install tokenizers)
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
async function main() {
  const [tokPath, inPath, outPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const samples = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  const out = [];
  for (const s of samples) {
    const enc = await tok.encode(s, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const dec = await tok.decode(ids, false);
    out.push({ ids: ids, decoded: dec });
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
  console.log(`encoded ${out.length} samples; vocab size ${tok.getVocabSize(true)}`);
}
main().catch(e => { console.error(e); process.exit(1); });
