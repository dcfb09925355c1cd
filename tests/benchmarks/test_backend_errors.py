"""A server that refuses native tool calls (vLLM without a tool-call parser): the JSON agent falls back to the
prompted format with one warning, and backend errors are reported as errors, never scored."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from cave.benchmarks.cli import summarize
from cave.benchmarks.json_agent import JsonAgent, ToolSpec

from cave.llm.base import ToolsUnsupported
from cave.llm.openai import OpenAICompatible

REFUSAL = '{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"}}'


class _Server(BaseHTTPRequestHandler):
    """A stock vLLM as far as tools go: 400 for any request with `tools`, else a prompted-format tool call."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if body.get("tools"):
            data, status = REFUSAL.encode(), 400
        else:
            reply = '{"name": "add", "arguments": {"a": 1, "b": 2}}'
            data = json.dumps({"choices": [{"message": {"content": reply}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}).encode()  # fmt: skip
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    _Server.seen = []
    httpd = HTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def _agent(url: str, native: bool | None) -> JsonAgent:
    llm = OpenAICompatible(base_url=url, model="m", max_attempts=1)
    tool = ToolSpec("add", "add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}}, lambda a, b: a + b)
    return JsonAgent(llm, [tool], native=native, max_steps=1)


def test_json_agent_falls_back_to_the_prompted_format(server, caplog):
    agent = _agent(server, None)
    assert agent.native  # an OpenAI-compatible server is assumed to take tools...
    result = agent.run("add 1 and 2")
    assert result.status != "error", result.trajectory.error
    assert not agent.native and "--enable-auto-tool-choice" in caplog.text  # ...until it says it cannot
    assert [bool(b.get("tools")) for b in _Server.seen] == [True, False]
    assert "add" in _Server.seen[1]["messages"][0]["content"]  # the prompted format lists the tools itself


def test_native_on_request_reports_the_server_flags(server):
    result = _agent(server, True).run("add 1 and 2")
    assert result.status == "error" and "--tool-call-parser" in result.trajectory.error


def test_backend_errors_are_not_scored():
    rows = [
        {"agent": "json", "category": "irrelevance", "valid": True, "status": "error"},  # no calls because it failed
        {"agent": "json", "category": "irrelevance", "valid": True, "status": "success"},
        {"agent": "json", "category": "simple", "valid": False, "status": "error"},
    ]
    s = summarize(rows, "category", "valid", title="t")
    groups = {g["category"]: g for g in s["groups"]}
    assert groups["irrelevance"]["rate"] == 1.0 and groups["irrelevance"]["errors"] == 1
    assert groups["simple"]["rate"] is None and groups["simple"]["errors"] == 1
    assert s["errors"] == 2 and s["entries"] == 3


def test_tools_unsupported_is_an_llm_error():
    assert issubclass(ToolsUnsupported, Exception)
