"""A stand-in for the Kubeflow Pipelines v2beta1 REST API on 127.0.0.1, for `rankpipe submit`.

It serves the endpoints `kfp.Client` 2.5.0 calls to start a run from a package
(kfp/client/client.py create_run_from_pipeline_package; paths from the generated
kfp_server_api ExperimentServiceApi, RunServiceApi and HealthzServiceApi):

    GET  /apis/v2beta1/healthz        from kfp.Client() when it knows no namespace
    GET  /apis/v2beta1/experiments    ?filter=<JSON predicates: display_name EQUALS name>
    POST /apis/v2beta1/experiments    {display_name, description, namespace}
    POST /apis/v2beta1/runs           {experiment_id, display_name, pipeline_spec,
                                       runtime_config: {pipeline_root, parameters}, ...}

and records every request (method, path, query, JSON body). Anything else answers 404 as the
API server's gateway does. `fail_runs` makes run creation answer that HTTP status.

Bounded: it listens on an ephemeral port of 127.0.0.1 only, and shuts itself down after
`lifetime_s` seconds even when the test never stops it (the `with` block stops it earlier).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PREFIX = "/apis/v2beta1"


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


class FakeKfpApi:
    def __init__(self, lifetime_s: float = 120.0, fail_runs: int | None = None) -> None:
        self.requests: list[Request] = []
        self.experiments: list[dict] = []
        self.fail_runs = fail_runs
        self._lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def runs(self) -> list[dict]:
        return [r.body for r in self.requests if (r.method, r.path) == ("POST", PREFIX + "/runs")]

    def __enter__(self) -> FakeKfpApi:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        self._timer = threading.Timer(self._lifetime_s, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict]:
        if (method, path) == ("GET", PREFIX + "/healthz"):
            return 200, {"multi_user": False, "commit_sha": "fake", "tag_name": "2.5.0"}
        if (method, path) == ("GET", PREFIX + "/experiments"):
            wanted = [
                p.get("stringValue", p.get("string_value"))
                for p in json.loads(query.get("filter", ["{}"])[0]).get("predicates", [])
                if p.get("key") == "display_name"
            ]
            found = [e for e in self.experiments if not wanted or e["display_name"] in wanted]
            return 200, ({"experiments": found, "total_size": len(found)} if found else {})
        if (method, path) == ("POST", PREFIX + "/experiments"):
            experiment = dict(body, experiment_id=str(uuid.uuid4()), storage_state="AVAILABLE")
            self.experiments.append(experiment)
            return 200, experiment
        if (method, path) == ("POST", PREFIX + "/runs"):
            if self.fail_runs:
                return self.fail_runs, {"error": "fake refusal", "code": 13, "message": "boom"}
            return 200, {
                "run_id": str(uuid.uuid4()),
                "experiment_id": body.get("experiment_id"),
                "display_name": body.get("display_name"),
                "state": "PENDING",
            }
        return 404, {"error": "Not Found", "code": 5, "message": "Not Found"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                query = parse_qs(url.query, keep_blank_values=True)
                with api._lock:
                    api.requests.append(Request(method, url.path, query, body))
                    status, answer = api._answer(method, url.path, query, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (BaseHTTPRequestHandler's name)
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def log_message(self, *args: object) -> None:  # quiet
                pass

        return Handler
