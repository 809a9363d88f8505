#!/usr/bin/env bash
# -m org/name from the Hugging Face hub and its cache (docs/hub.md), without the internet: tests/hub/fake_hub.py
# answers like the hub on 127.0.0.1 (HF_ENDPOINT), the cache is a temporary folder (HF_HUB_CACHE / HF_HOME).
# A download (resumed after a dropped connection), a sharded checkpoint, a cache laid out as huggingface_hub lays
# it out, :quant selection, a gated repository, a checksum mismatch, offline mode, two pulls at once, a write that
# fails half-way and a cache that cannot be written; each error leaves the cache consistent. The hub over HTTPS with
# a certificate made here (trusted through SSL_CERT_FILE / CURL_CA_BUNDLE, refused without), and a hub id given to
# convert, infill and serve.
#
#   tests/cli/hub.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
pids=()  # the fake hubs and the server this script started
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset HF_TOKEN HF_HUB_OFFLINE HF_HOME HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_TOKEN_PATH
export HOME=$tmp/home  # nothing may fall back to the real ~/.cache
demo=$root/models/demo
gguf=$root/tests/data/gguf

# A sharded copy of the demo checkpoint: two safetensors files and their index (stdlib Python).
mkdir -p "$tmp/sharded"
python3 - "$demo/model.safetensors" "$tmp/sharded" <<'PY'
import json, struct, sys
src, out = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
names = sorted(k for k in header if k != "__metadata__")
index = {"metadata": {}, "weight_map": {}}
for part, group in enumerate([names[::2], names[1::2]]):
    fname = "model-%05d-of-00002.safetensors" % (part + 1)
    h, blob = {}, b""
    for k in group:
        a, b = header[k]["data_offsets"]
        h[k] = dict(header[k], data_offsets=[len(blob), len(blob) + b - a])
        blob += data[a:b]
        index["weight_map"][k] = fname
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(out + "/" + fname, "wb").write(struct.pack("<Q", len(hb)) + hb + blob)
json.dump(index, open(out + "/model.safetensors.index.json", "w"))
PY

cat >"$tmp/hub.json" <<JSON
{"token": "secret", "repos": {
 "test/demo": {"files": {"config.json": "$demo/config.json", "generation_config.json": "$demo/generation_config.json",
   "tokenizer.json": "$demo/tokenizer.json", "tokenizer_config.json": "$demo/tokenizer_config.json",
   "model.safetensors": "$demo/model.safetensors", "README.md": "$demo/README.md"},
   "lfs": ["model.safetensors", "tokenizer.json"], "drop": {"model.safetensors": 1}},
 "test/sharded": {"files": {"config.json": "$demo/config.json", "tokenizer.json": "$demo/tokenizer.json",
   "model.safetensors.index.json": "$tmp/sharded/model.safetensors.index.json",
   "model-00001-of-00002.safetensors": "$tmp/sharded/model-00001-of-00002.safetensors",
   "model-00002-of-00002.safetensors": "$tmp/sharded/model-00002-of-00002.safetensors"},
   "lfs": ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]},
 "test/gguf": {"files": {"llada_tiny_f16.gguf": "$gguf/llada_tiny_f16.gguf", "llada_tiny_f32.gguf": "$gguf/llada_tiny_f32.gguf",
   "llada_tiny_q8_0.gguf": "$gguf/llada_tiny_q8_0.gguf", "README.md": "$gguf/README.md"},
   "lfs": ["llada_tiny_f16.gguf", "llada_tiny_f32.gguf", "llada_tiny_q8_0.gguf"]},
 "test/gated": {"files": {"tiny-Q8_0.gguf": "$gguf/llada_tiny_q8_0.gguf"}, "lfs": ["tiny-Q8_0.gguf"], "gated": true},
 "test/corrupt": {"files": {"tiny.gguf": "$gguf/llada_tiny_q8_0.gguf"}, "lfs": ["tiny.gguf"], "corrupt": ["tiny.gguf"]},
 "test/flaky": {"files": {"tiny.gguf": "$gguf/llada_tiny_f32.gguf"}, "lfs": ["tiny.gguf"], "drop": {"tiny.gguf": 100}},
 "test/slow": {"files": {"tiny.gguf": "$gguf/llada_tiny_q8_0.gguf"}, "lfs": ["tiny.gguf"], "delay": {"tiny.gguf": 1.5}}
}}
JSON
python3 "$root/tests/hub/fake_hub.py" "$tmp/hub.json" "$tmp/port" "$tmp/requests.log" 2>"$tmp/hub.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || fail "the fake hub did not start: $(cat "$tmp/hub.err")"
export HF_ENDPOINT="http://127.0.0.1:$(cat "$tmp/port")"
export HF_HUB_CACHE=$tmp/cache
dead=http://127.0.0.1:9  # nothing listens there: a run that touches the network fails

expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out
  if out=$("$bin" "$@" 2>&1); then fail "succeeded: $*"; fi
  grep -q -- "$pattern" <<<"$out" || fail "'$*' did not say '$pattern': $out"
}
requests() { grep -c -- "$1" "$tmp/requests.log" || true; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
tokens() {  # tokens MODEL [ENV...] -> the generated ids of a fixed prompt
  "$bin" generate -m "$@" --prompt-ids 480,158,483 --gen-length 8 --steps 4 --json -q |
    python3 -c "import json, sys; print(json.load(sys.stdin)['outputs'])"
}
expected=$(tokens "$demo")

# A download: the weights resumed within the run after the hub's storage drops the connection half-way; the
# storage never sees the token; the snapshot links into blobs named by sha256 / git sha1; nothing partial left.
path=$("$bin" pull test/demo 2>"$tmp/pull.err") || fail "pull test/demo: $(cat "$tmp/pull.err")"
grep -q "resuming (1/3)" "$tmp/pull.err" || fail "no resumption after the drop: $(cat "$tmp/pull.err")"
size=$(stat -c %s "$demo/model.safetensors")
grep -q "GET /cdn/.*model.safetensors range=bytes=$((size / 2))- auth=no" "$tmp/requests.log" ||
  fail "the resumption did not ask for bytes $((size / 2))-: $(grep cdn "$tmp/requests.log")"
repo=$HF_HUB_CACHE/models--test--demo
commit=$(cat "$repo/refs/main")
[ "$path" = "$repo/snapshots/$commit" ] || fail "pull printed $path"
[ "$(readlink "$path/model.safetensors")" = "../../blobs/$(sha256 "$demo/model.safetensors")" ] ||
  fail "model.safetensors links to $(readlink "$path/model.safetensors")"
git_sha1=$(python3 -c "import hashlib, sys; d = open(sys.argv[1], 'rb').read(); print(hashlib.sha1(b'blob %d\0' % len(d) + d).hexdigest())" "$demo/config.json")
[ "$(readlink "$path/config.json")" = "../../blobs/$git_sha1" ] || fail "config.json links to $(readlink "$path/config.json")"
[ ! -e "$path/README.md" ] || fail "README.md was downloaded: the engine does not need it"
ls "$repo/blobs" | grep -q incomplete && fail "a partial file was left"
cmp -s "$path/model.safetensors" "$demo/model.safetensors" || fail "the weights differ"
# The model runs from the cache with no network, and gives the demo model's tokens.
[ "$(HF_ENDPOINT=$dead tokens test/demo)" = "$expected" ] || fail "generate -m test/demo differs from $expected"
before=$(wc -l <"$tmp/requests.log")
"$bin" pull test/demo 2>"$tmp/pull.err" >/dev/null || fail "second pull: $(cat "$tmp/pull.err")"
grep -q "up to date" "$tmp/pull.err" || fail "second pull: $(cat "$tmp/pull.err")"
[ "$(tail -n +$((before + 1)) "$tmp/requests.log" | grep -c /cdn/)" = 0 ] || fail "the second pull downloaded again"
# By commit, offline.
[ "$(HF_HUB_OFFLINE=1 tokens "test/demo@$commit")" = "$expected" ] || fail "test/demo@commit offline"
expect_error "no such revision" pull test/demo@v9

# A sharded checkpoint: the index first, then the shards it names.
[ "$(tokens test/sharded)" = "$expected" ] || fail "the sharded copy gives other tokens"
[ -e "$HF_HUB_CACHE/models--test--sharded/snapshots/$(cat "$HF_HUB_CACHE/models--test--sharded/refs/main")/model-00002-of-00002.safetensors" ] ||
  fail "shard 2 missing"

# A cache written as huggingface_hub writes it (blobs by sha256 / git sha1, relative links, refs/main), found
# through HF_HOME, used with no network at all.
python3 - "$demo" "$tmp/hfhome/hub" <<'PY'
import hashlib, os, sys
src, cache = sys.argv[1], sys.argv[2]
repo = os.path.join(cache, "models--someone--demo-llada")
commit = "0123456789abcdef0123456789abcdef01234567"
os.makedirs(os.path.join(repo, "blobs")); os.makedirs(os.path.join(repo, "refs"))
snap = os.path.join(repo, "snapshots", commit); os.makedirs(snap)
for name in ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]:
    data = open(os.path.join(src, name), "rb").read()
    lfs = name.endswith(".safetensors") or name == "tokenizer.json"
    etag = hashlib.sha256(data).hexdigest() if lfs else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    open(os.path.join(repo, "blobs", etag), "wb").write(data)
    os.symlink("../../blobs/" + etag, os.path.join(snap, name))
open(os.path.join(repo, "refs", "main"), "w").write(commit)
PY
[ "$(HF_HUB_CACHE= HF_HOME=$tmp/hfhome HF_ENDPOINT=$dead tokens someone/demo-llada)" = "$expected" ] ||
  fail "the huggingface_hub-style cache did not run"
models=$(HF_HUB_CACHE= HF_HOME=$tmp/hfhome "$bin" models)
grep -q "someone/demo-llada .*14.6 MB.*main 01234567" <<<"$models" || fail "dllm models: $models"

# :quant picks one GGUF file; without it, a repository of several lists them; a tag that matches none too.
expect_error "llada_tiny_f16.gguf, llada_tiny_f32.gguf, llada_tiny_q8_0.gguf" pull test/gguf
expect_error "no .gguf file of test/gguf matches 'Q5_K'" pull test/gguf:Q5_K
qpath=$("$bin" pull -q test/gguf:Q8_0)
[[ "$qpath" == */llada_tiny_q8_0.gguf ]] || fail "test/gguf:Q8_0 gave $qpath"
[ "$(ls "$HF_HUB_CACHE/models--test--gguf/blobs" | wc -l)" = 1 ] || fail ":Q8_0 downloaded more than its file"
HF_HUB_OFFLINE=1 tokens test/gguf:q8_0 >/dev/null || fail "generate -m test/gguf:q8_0 offline"
"$bin" pull -q test/gguf:llada_tiny_f16.gguf >/dev/null || fail "test/gguf:FILE"

# A gated repository: 401 without a token, 403 with one that has no access, fine with the right one (HF_TOKEN or
# --hf-token); the storage host refuses any Authorization, so these downloads also prove it was never sent there.
expect_error "401.*HF_TOKEN" pull test/gated
HF_TOKEN=wrong expect_error "403.*accept its terms" pull test/gated
HF_TOKEN=secret "$bin" pull -q test/gated >/dev/null || fail "HF_TOKEN=secret pull test/gated"
rm -rf "$HF_HUB_CACHE/models--test--gated"
"$bin" pull -q --hf-token secret test/gated >/dev/null || fail "--hf-token secret pull test/gated"
[ "$(grep "/cdn/" "$tmp/requests.log" | grep -c "auth=yes")" = 0 ] || fail "a token went to the storage host"

# A checksum mismatch is refused and leaves nothing: no blob, no partial file, no snapshot link.
expect_error "sha256 is .* but the hub's ETag says .*refused" pull test/corrupt
[ -z "$(ls "$HF_HUB_CACHE/models--test--corrupt/blobs")" ] || fail "the corrupt download left $(ls "$HF_HUB_CACHE/models--test--corrupt/blobs")"
[ ! -e "$HF_HUB_CACHE/models--test--corrupt/snapshots" ] || [ -z "$(find "$HF_HUB_CACHE/models--test--corrupt/snapshots" -type l)" ] ||
  fail "the corrupt download was linked"

# A connection that keeps dropping: the run gives up with the partial file kept (never under the final name); the
# next run resumes it with a Range request.
expect_error "run the same command again to resume" pull test/flaky
partial=$(ls "$HF_HUB_CACHE/models--test--flaky/blobs/")
[[ "$partial" == *.incomplete ]] || fail "after the drops the blobs are: $partial"
have=$(stat -c %s "$HF_HUB_CACHE/models--test--flaky/blobs/$partial")
curl -sf "$HF_ENDPOINT/_set?repo=test/flaky&file=tiny.gguf&drop=0" >/dev/null
"$bin" pull -q test/flaky >/dev/null || fail "the pull after the drops"
grep -q "GET /cdn/.*tiny.gguf range=bytes=$have-" "$tmp/requests.log" || fail "no Range request from $have"
cmp -s "$HF_HUB_CACHE/models--test--flaky/blobs/$(sha256 "$gguf/llada_tiny_f32.gguf")" "$gguf/llada_tiny_f32.gguf" ||
  fail "the resumed file differs"

# Offline: a model not in the cache is an error, and nothing was asked of the hub.
before=$(wc -l <"$tmp/requests.log")
HF_HUB_OFFLINE=1 expect_error "offline mode" pull test/slow
expect_error "offline mode" generate -m test/slow --offline --prompt-ids 1,2 --gen-length 4
[ "$(wc -l <"$tmp/requests.log")" = "$before" ] || fail "offline mode asked the hub"
expect_error "no repository test/nope" pull test/nope
expect_error "no such file or directory (nor a Hugging Face id" generate -m ./no/such/dir --prompt-ids 1

# Two pulls at once: one downloads under the lock, the other waits and uses its blob.
"$bin" pull test/slow >"$tmp/a.out" 2>"$tmp/a.err" &
a=$!
"$bin" pull test/slow >"$tmp/b.out" 2>"$tmp/b.err" &
b=$!
wait $a || fail "pull a: $(cat "$tmp/a.err")"
wait $b || fail "pull b: $(cat "$tmp/b.err")"
[ "$(grep -c "GET /cdn/.*r=test%2Fslow" "$tmp/requests.log")" = 1 ] || fail "two pulls downloaded $(grep -c "GET /cdn/.*r=test%2Fslow" "$tmp/requests.log") times"
cmp -s "$(cat "$tmp/a.out")" "$gguf/llada_tiny_q8_0.gguf" || fail "the locked download differs"

# A write that fails half-way (a file size limit stands in for a full disk): a clear error, the partial file kept
# for the next run, nothing under the final name; without the limit the next run finishes it.
if (trap '' XFSZ; ulimit -f 1024; "$bin" pull -q test/gguf:F32 >/dev/null 2>"$tmp/full.err"); then fail "pull under ulimit -f"; fi
grep -q "cannot write .*incomplete: File too large .*next run resumes" "$tmp/full.err" || fail "full disk: $(cat "$tmp/full.err")"
[ ! -e "$HF_HUB_CACHE/models--test--gguf/blobs/$(sha256 "$gguf/llada_tiny_f32.gguf")" ] || fail "a partial blob got its final name"
"$bin" pull -q test/gguf:F32 >/dev/null || fail "the pull after the full disk"

# A cache that cannot be written says so and names it.
touch "$tmp/afile"
HF_HUB_CACHE=$tmp/afile/hub expect_error "cannot write the model cache: $tmp/afile/hub" pull test/gguf:F16
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
  HF_HUB_CACHE=$tmp/ro expect_error "cannot write the model cache" pull test/gguf:F16
fi

# HTTPS: the hub behind a self-signed certificate made here. Trusted through SSL_CERT_FILE or CURL_CA_BUNDLE, the
# download (with its redirect to the storage host, also https) works; without it the run fails and says why.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>"$tmp/openssl.err" ||
  fail "openssl: $(cat "$tmp/openssl.err")"
python3 "$root/tests/hub/fake_hub.py" "$tmp/hub.json" "$tmp/tls.port" "$tmp/tls.log" "$tmp/cert.pem" "$tmp/key.pem" \
  2>"$tmp/tls.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/tls.port" ] && break; sleep 0.1; done
[ -s "$tmp/tls.port" ] || fail "the TLS fake hub did not start: $(cat "$tmp/tls.err")"
tls="https://127.0.0.1:$(cat "$tmp/tls.port")"
unset CURL_CA_BUNDLE SSL_CERT_FILE
HF_ENDPOINT=$tls HF_HUB_CACHE=$tmp/tlscache expect_error "certificate could not be verified.*SSL_CERT_FILE" pull test/gguf:Q8_0
[ ! -e "$tmp/tlscache/models--test--gguf/blobs" ] || [ -z "$(ls "$tmp/tlscache/models--test--gguf/blobs")" ] ||
  fail "the refused download left $(ls "$tmp/tlscache/models--test--gguf/blobs")"
tpath=$(SSL_CERT_FILE=$tmp/cert.pem HF_ENDPOINT=$tls HF_HUB_CACHE=$tmp/tlscache "$bin" pull -q test/gguf:Q8_0 2>&1) ||
  fail "pull over https with SSL_CERT_FILE: $tpath"
cmp -s "$tpath" "$gguf/llada_tiny_q8_0.gguf" || fail "the https download differs"
grep -q "GET /cdn/.*llada_tiny_q8_0.gguf" "$tmp/tls.log" || fail "no storage download over https: $(cat "$tmp/tls.log")"
rm -rf "$tmp/tlscache"
CURL_CA_BUNDLE=$tmp/cert.pem HF_ENDPOINT=$tls HF_HUB_CACHE=$tmp/tlscache "$bin" pull -q test/gguf:Q8_0 >/dev/null ||
  fail "pull over https with CURL_CA_BUNDLE"

# A hub id given to the other commands, from the cache with no network: convert, infill, serve.
export HF_HUB_OFFLINE=1
"$bin" convert -m test/demo -o "$tmp/hub_q8.gguf" --type q8_0 -q 2>"$tmp/convert.err" ||
  fail "convert -m test/demo: $(cat "$tmp/convert.err")"
# The same file as converting the demo folder under the snapshot's name (general.name is the folder's name).
ln -s "$(cd "$demo" && pwd)" "$tmp/$commit"
"$bin" convert -m "$tmp/$commit" -o "$tmp/demo_q8.gguf" --type q8_0 -q 2>/dev/null
cmp -s "$tmp/hub_q8.gguf" "$tmp/demo_q8.gguf" || fail "convert -m test/demo differs from converting $demo"
infill() {  # infill MODEL -> the filled canvas of a fixed text
  "$bin" infill -m "$1" --text "The cat <|mask:4|> on the mat." --steps 4 --json -q |
    python3 -c "import json, sys; print(json.load(sys.stdin)['ids'])"
}
filled=$(infill test/demo 2>&1) || fail "infill -m test/demo: $filled"
[ "$filled" = "$(infill "$demo")" ] || fail "infill -m test/demo gave $filled, not $(infill "$demo")"
"$bin" serve --model test/demo --port 0 2>"$tmp/serve.log" &
serve_pid=$!
pids+=($serve_pid)
url=""
for _ in $(seq 100); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$tmp/serve.log" | head -n1)
  [ -n "$url" ] && break
  kill -0 "$serve_pid" 2>/dev/null || fail "serve --model test/demo exited: $(cat "$tmp/serve.log")"
  sleep 0.1
done
[ -n "$url" ] || fail "serve --model test/demo did not start: $(cat "$tmp/serve.log")"
health=$(curl -sf "$url/health") || fail "serve --model test/demo: /health did not answer"
kill "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
unset HF_HUB_OFFLINE

models=$("$bin" models --json)
python3 - "$models" <<'PY' || fail "dllm models --json: $models"
import json, sys
m = {r["repo"]: r for r in json.loads(sys.argv[1])}
assert m["test/demo"]["bytes"] > 14_000_000 and m["test/demo"]["refs"]["main"], m["test/demo"]
assert m["test/gguf"]["partial_bytes"] == 0, m["test/gguf"]
PY
echo "hub: ok (download with resume, sharded, huggingface_hub cache, :quant, gated, checksum, offline, lock, full disk, read-only cache, https, convert/infill/serve)"
