"""A local stand-in for the Hugging Face Hub: the part of its HTTP API that `huggingface_hub` uses for the calls this
project makes, with dataset repos held in memory, so the Hub commands are tested offline.

Reading (`snapshot_download`): repo info at a revision, the recursive file tree, and each file's HEAD and GET.
Writing (`create_repo`, `list_repo_files`, `create_commit`): repo creation, the preupload check (every file
"regular", so it comes inline in the commit) and the NDJSON commit, which makes a new commit of the repo.
Every request is kept (method and path) so a test can say which endpoints were used.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


@dataclass
class Repo:
    commits: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)  # (sha, files), oldest first
    branches: dict[str, str] = field(default_factory=dict)  # name -> sha

    def commit(self, files: dict[str, bytes], branch: str = "main") -> str:
        sha = hashlib.sha1(json.dumps([len(self.commits), sorted(files)]).encode()
                           + b"".join(files[k] for k in sorted(files))).hexdigest()
        self.commits.append((sha, dict(files)))
        self.branches[branch] = sha
        return sha

    def files_at(self, revision: str) -> tuple[str, dict[str, bytes]] | None:
        sha = self.branches.get(revision, revision)
        return next(((s, f) for s, f in self.commits if s == sha), None)


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class HubStandIn:
    """`with HubStandIn() as hub:` serves at `hub.endpoint`; `hub.repos["ORG/NAME"]` are its dataset repos."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.commit_bodies: list[list[dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                      head: bool = False) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                # One request per connection: once closed, the stand-in is unreachable at once (a kept-alive
                # connection would go on being served by its handler thread).
                self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, obj: object, status: int = 200) -> None:
                self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json"})

            def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
                self._send(status, json.dumps({"error": message}).encode(),
                           {"Content-Type": "application/json", "X-Error-Code": code,
                            "X-Error-Message": message}, head=head)

            def _route(self, method: str) -> None:
                path = unquote(urlparse(self.path).path)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                outer.requests.append((method, path))
                parts = path.strip("/").split("/")
                try:
                    outer.handle(self, method, parts, body)
                except Exception as err:  # a bug in the stand-in: say so to the client
                    self._error(500, "StandInError", f"{type(err).__name__}: {err}")

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                self._route("GET")

            def do_HEAD(self) -> None:  # noqa: N802
                self._route("HEAD")

            def do_POST(self) -> None:  # noqa: N802
                self._route("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------------------------------------ routes
    def handle(self, h: BaseHTTPRequestHandler, method: str, parts: list[str], body: bytes) -> None:
        send = h._send  # type: ignore[attr-defined]
        as_json = h._json  # type: ignore[attr-defined]
        error = h._error  # type: ignore[attr-defined]
        if parts[:3] == ["api", "repos", "create"] and method == "POST":
            req = json.loads(body)
            repo_id = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
            if repo_id not in self.repos:
                self.repos[repo_id] = Repo()
                self.repos[repo_id].commit({".gitattributes": b"*.parquet filter=lfs\n"})
            return as_json({"url": f"{self.endpoint}/datasets/{repo_id}", "name": repo_id})
        if parts[:2] == ["api", "datasets"] and len(parts) >= 6:
            repo_id, action, revision = f"{parts[2]}/{parts[3]}", parts[4], parts[5]
            repo = self.repos.get(repo_id)
            if repo is None:
                return error(404, "RepoNotFound", f"Repository Not Found for url: {repo_id}")
            if action in ("preupload", "commit") and method == "POST":
                return self._write(h, repo_id, repo, action, revision, body)
            found = repo.files_at(revision)
            if found is None:
                return error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            sha, files = found
            if action == "revision":
                return as_json({"id": repo_id, "sha": sha, "private": False, "disabled": False, "gated": False,
                                "siblings": [{"rfilename": p} for p in sorted(files)], "tags": [],
                                "lastModified": "2026-01-01T00:00:00.000Z", "downloads": 0, "likes": 0})
            if action == "tree":
                prefix = "/".join(parts[6:])
                return as_json([{"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                                for p, b in sorted(files.items()) if p.startswith(prefix)])
        if parts[:2] == ["api", "validate-yaml"] and method == "POST":
            return as_json({"errors": [], "warnings": []})  # the Hub's card check: accepted here
        if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            repo = self.repos.get(f"{parts[1]}/{parts[2]}")
            found = repo.files_at(parts[4]) if repo else None
            if found is None:
                return error(404, "RepoNotFound" if repo is None else "RevisionNotFound", "not found",
                             head=method == "HEAD")
            sha, files = found
            name = "/".join(parts[5:])
            if name not in files:
                return error(404, "EntryNotFound", f"{name} not found", head=method == "HEAD")
            data = files[name]
            return send(200, data, {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                                    "Content-Type": "application/octet-stream"}, head=method == "HEAD")
        return error(404, "NotFound", f"the stand-in does not serve {method} /{'/'.join(parts)}")

    def _write(self, h: BaseHTTPRequestHandler, repo_id: str, repo: Repo, action: str, revision: str,
               body: bytes) -> None:
        as_json = h._json  # type: ignore[attr-defined]
        if action == "preupload":
            req = json.loads(body)
            return as_json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                      for f in req["files"]]})
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        self.commit_bodies.append(lines)
        files = dict(repo.files_at(revision)[1]) if repo.files_at(revision) else {}
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] == "deletedFile":
                files.pop(value["path"], None)
        sha = repo.commit(files, revision)
        return as_json({"commitUrl": f"{self.endpoint}/datasets/{repo_id}/commit/{sha}", "commitOid": sha,
                        "success": True})
