// usage: node oracle.js tokenizer.json < texts.jsonl (one JSON string per line) > out.jsonl
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter(l => l.length);
  let n = 0;
  for (const l of lines) {
    const text = JSON.parse(l);
    const e = await tok.encode(text, null, {addSpecialTokens: false});
    const es = await tok.encode(text, null, {addSpecialTokens: true});
    const ids = Array.from(e.getIds()), ids_special = Array.from(es.getIds());
    const o = {id: 'gen-' + (++n), text, ids, ids_special,
      decoded: await tok.decode(ids, false), decoded_skip: await tok.decode(ids, true),
      decoded_special: await tok.decode(ids_special, false), decoded_special_skip: await tok.decode(ids_special, true)};
    process.stdout.write(JSON.stringify(o).replace(/[\u007f-\uffff]/g, c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')) + '\n');
  }
})();
