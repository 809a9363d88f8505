#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, for tests without the internet (docs/hub.md lists what it imitates).

    fake_hub.py CONFIG.json PORT_FILE LOG_FILE [CERT.pem KEY.pem]

With CERT and KEY it answers over TLS (https, the storage redirect too).

CONFIG: {"token": "secret", "repos": {"org/name": {"files": {"name in repo": "local path"}, "lfs": [names],
         "gated": bool, "corrupt": [names], "drop": {name: times}, "delay": {name: seconds}}}}

  GET  /api/models/{org}/{name}[/revision/{rev}]  -> {"id", "sha", "siblings": [{"rfilename"}], "gated"}
  HEAD|GET /{org}/{name}/resolve/{rev}/{file}      -> a small (git) file: 200, ETag = its git blob sha1;
       an LFS file: 302 to http(s)://localhost:PORT/cdn/... (another host name than 127.0.0.1) with X-Linked-Etag =
       its sha256 and X-Linked-Size; X-Repo-Commit on both; 401 (no token) / 403 (another token) for a gated
       repository, 404 with X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound.
  GET  /cdn/{sha256}?r=...&f=...                   -> the content, Range: bytes=N- answered 206; a request that
       carries Authorization is refused (400), as a storage host that takes only its signed URL would; "drop":
       the first N answers stop half-way and close the connection; "corrupt": one byte changed; "delay": slow.
  GET  /_set?repo=..&file=..&drop=N                -> changes a file's drop count.
Every request is logged as "METHOD PATH range=... auth=yes|no".
"""
import hashlib
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

config = json.load(open(sys.argv[1]))
port_file, log_file = sys.argv[2], sys.argv[3]
log_lock = threading.Lock()
repos = {}
for repo, spec in config["repos"].items():
    files = {}
    for name, path in spec["files"].items():
        data = open(path, "rb").read()
        lfs = name in spec.get("lfs", [])
        etag = (hashlib.sha256(data).hexdigest() if lfs else
                hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())
        files[name] = {"data": data, "lfs": lfs, "etag": etag}
    commit = hashlib.sha1(json.dumps(sorted((n, f["etag"]) for n, f in files.items())).encode()).hexdigest()
    repos[repo] = {"spec": spec, "files": files, "commit": commit, "drop": dict(spec.get("drop", {}))}


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def note(self):
        with log_lock, open(log_file, "a") as f:
            f.write("%s %s range=%s auth=%s\n" % (self.command, self.path, self.headers.get("Range", "-"),
                                                   "yes" if self.headers.get("Authorization") else "no"))

    def answer(self, status, headers=None, body=b""):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        self.answer(status, {"X-Error-Code": code, "Content-Type": "application/json"},
                    json.dumps({"error": message}).encode())

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.note()
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        query = dict(urllib.parse.parse_qsl(url.query))
        if parts[0] == "_set":
            repos[query["repo"]]["drop"][query["file"]] = int(query["drop"])
            return self.answer(200)
        if parts[0] == "cdn":
            return self.cdn(query)
        if parts[0] == "api" and len(parts) >= 4 and parts[1] == "models":
            repo = repos.get(parts[2] + "/" + parts[3])
            if repo is None:
                return self.error(404, "RepoNotFound", "Repository not found")
            rev = parts[5] if len(parts) >= 6 and parts[4] == "revision" else "main"
            if rev not in ("main", repo["commit"]):
                return self.error(404, "RevisionNotFound", "Revision not found")
            body = {"id": parts[2] + "/" + parts[3], "sha": repo["commit"],
                    "gated": "manual" if repo["spec"].get("gated") else False,
                    "siblings": [{"rfilename": n} for n in sorted(repo["files"])]}
            return self.answer(200, {"Content-Type": "application/json"}, json.dumps(body).encode())
        if len(parts) >= 5 and parts[2] == "resolve":
            name = parts[0] + "/" + parts[1]
            repo = repos.get(name)
            if repo is None:
                return self.error(404, "RepoNotFound", "Repository not found")
            if repo["spec"].get("gated"):
                auth = self.headers.get("Authorization")
                if not auth:
                    return self.error(401, "GatedRepo", "Access to this repository is restricted")
                if auth != "Bearer " + config["token"]:
                    return self.error(403, "GatedRepo", "Access to this repository is restricted")
            if parts[3] not in ("main", repo["commit"]):
                return self.error(404, "RevisionNotFound", "Revision not found")
            fname = "/".join(parts[4:])
            f = repo["files"].get(fname)
            if f is None:
                return self.error(404, "EntryNotFound", "Entry not found")
            common = {"X-Repo-Commit": repo["commit"]}
            if f["lfs"]:
                host = "localhost:%d" % self.server.server_address[1]
                where = "%s://%s/cdn/%s?%s" % (scheme, host, f["etag"],
                                               urllib.parse.urlencode({"r": name, "f": fname}))
                return self.answer(302, dict(common, **{"Location": where, "X-Linked-Etag": '"%s"' % f["etag"],
                                                        "X-Linked-Size": str(len(f["data"])),
                                                        "ETag": '"cdn-%s"' % f["etag"][:8]}))
            return self.content(repo, fname, f, dict(common, ETag='"%s"' % f["etag"]))
        return self.error(404, "NotFound", "no such route")

    def cdn(self, query):
        if self.headers.get("Authorization"):
            return self.answer(400, {}, b"only the signed URL may authorize this request")
        repo = repos[query["r"]]
        return self.content(repo, query["f"], repo["files"][query["f"]], {})

    def content(self, repo, fname, f, headers):
        data = f["data"]
        if fname in repo["spec"].get("corrupt", []):
            data = data[:-1] + bytes([data[-1] ^ 1])
        start = 0
        rng = self.headers.get("Range")
        status = 200
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.answer(416, {"Content-Range": "bytes */%d" % len(data)})
            status = 206
            headers = dict(headers, **{"Content-Range": "bytes %d-%d/%d" % (start, len(data) - 1, len(data))})
        body = data[start:]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "HEAD":
            return
        drop = repo["drop"].get(fname, 0) > 0
        if drop:
            repo["drop"][fname] -= 1
            body = body[:len(body) // 2]
        delay = repo["spec"].get("delay", {}).get(fname, 0)
        chunk = 1 << 16
        for at in range(0, len(body), chunk):
            self.wfile.write(body[at:at + chunk])
            if delay:
                time.sleep(delay * chunk / max(1, len(data)))
        if drop:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
scheme = "http"
if len(sys.argv) > 5:
    import ssl  # noqa: E402
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[4], sys.argv[5])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https"
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
