#!/usr/bin/env bash
# K `dllm serve` replicas behind nginx on one machine (deploy/nginx.conf; docs/deploy.md says how the same
# layout spans machines).
#
#   scripts/scale_out.sh [-k K] [-p PORT] [-b BASE_PORT] [-d DIR] -- SERVE_ARGS...
#
# Replica i listens on 127.0.0.1:BASE_PORT+i (default 8081, 8082, ...), nginx on 127.0.0.1:PORT (default 8080).
# DIR (default a new temporary directory) holds nginx's config, pid and temp files and each replica's log. Prints
# "replica I pid P port Q" per replica, then "nginx listening on http://127.0.0.1:PORT", and runs until SIGINT /
# SIGTERM, which drains the replicas (SIGTERM: their streams finish) and stops nginx. DLLM_BIN: the dllm binary
# (default build/dllm); NGINX: nginx (default: the one on PATH, else /usr/sbin/nginx).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k=2 port=8080 base=8081 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -k) k=$2; shift 2 ;;
    -p) port=$2; shift 2 ;;
    -b) base=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-k K] [-p PORT] [-b BASE_PORT] [-d DIR] -- SERVE_ARGS..." >&2; exit 2 ;;
  esac
done
bin=${DLLM_BIN:-$root/build/dllm}
nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$bin" ] || { echo "scale_out.sh: no dllm binary at $bin (build it, or set DLLM_BIN)" >&2; exit 2; }
[ -x "$nginx" ] || { echo "scale_out.sh: nginx not found (apt-get install nginx)" >&2; exit 2; }
[ -n "$dir" ] || dir=$(mktemp -d /tmp/dllm-scale-out.XXXXXX)
mkdir -p "$dir/tmp"
chmod 755 "$dir" "$dir/tmp"  # nginx workers may run as another user (a root master drops to nobody)

pids=()
stop() {
  [ -f "$dir/nginx.pid" ] && kill "$(cat "$dir/nginx.pid")" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

for i in $(seq 0 $((k - 1))); do
  p=$((base + i))
  "$bin" serve "$@" --host 127.0.0.1 --port "$p" 2>"$dir/replica-$i.log" &
  pids+=($!)
  for _ in $(seq 1 600); do
    grep -q "listening on" "$dir/replica-$i.log" && break
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "replica $i exited:" >&2; cat "$dir/replica-$i.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "listening on" "$dir/replica-$i.log" || { echo "replica $i did not start" >&2; exit 1; }
  echo "replica $i pid ${pids[-1]} port $p"
done

# deploy/nginx.conf with this run's ports and replicas (the lines it marks "scale_out.sh").
servers=""
for i in $(seq 0 $((k - 1))); do
  servers+="    server 127.0.0.1:$((base + i)) max_fails=1 fail_timeout=10s;\n"
done
awk -v servers="$servers" -v port="$port" '
  /# scale_out.sh: one line per replica/ { printf "%s", servers; next }
  /server 127\.0\.0\.1:[0-9]+ .*# scale_out.sh/ { next }
  /listen 127\.0\.0\.1:[0-9]+;/ { sub(/127\.0\.0\.1:[0-9]+/, "127.0.0.1:" port) }
  { print }
' "$root/deploy/nginx.conf" >"$dir/nginx.conf"
"$nginx" -p "$dir" -c "$dir/nginx.conf" -e stderr 2>"$dir/nginx.log" &
nginx_pid=$!
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/health" && break
  kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx exited:" >&2; cat "$dir/nginx.log" >&2; exit 1; }
  sleep 0.1
done
echo "nginx listening on http://127.0.0.1:$port (config $dir/nginx.conf)"
wait "$nginx_pid"
