"""Shared helpers: the repository's recordings, and provider streams built from calls."""

from __future__ import annotations

import faulthandler
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Sequence, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STREAMS = REPO / "examples" / "streams"

# A test that waits forever (a GIL never released, an answer never delivered) fails loudly
# instead of hanging the suite.
faulthandler.dump_traceback_later(int(os.environ.get("PYTEST_WATCHDOG_SECS", "600")), exit=True)


# No ledger and no MCP listing cache in the home folder: what a test's sessions leave stays
# in its own folders.
QUIET: Dict[str, Any] = {"audit": {"ledger_dir": ""}, "mcp": {"tool_cache_dir": ""}}


def chat_stream(calls: Sequence[Tuple[str, Any]], text: str = "") -> bytes:
    """An OpenAI Chat response calling ``calls`` (name, arguments: a dict, or raw text)."""
    out = []
    if text:
        out.append({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]})
    for n, (name, args) in enumerate(calls):
        arguments = args if isinstance(args, str) else json.dumps(args)
        out.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": n, "id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": arguments}}]},
                        "finish_reason": None,
                    }
                ]
            }
        )
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in out) + "data: [DONE]\n\n"
    return body.encode()


def toolslot_bin() -> str:
    """The ``toolslot`` binary built beside the extension (tests/pytest.rs says where)."""
    path = os.environ.get("PYTEST_TOOLSLOT_BIN") or shutil.which("toolslot")
    assert path, "PYTEST_TOOLSLOT_BIN is not set: run pytest through `cargo test -p toolslot-python`"
    return path


def replay(args: List[str], cwd: pathlib.Path) -> List[Dict[str, Any]]:
    """``toolslot replay`` with ``args``: its events, one dict a line."""
    out = subprocess.run([toolslot_bin(), "replay", *args], cwd=cwd, capture_output=True, check=True, timeout=120)
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of examples/workspace."""
    ws = tmp_path / "ws"
    shutil.copytree(REPO / "examples" / "workspace", ws)
    return ws


@pytest.fixture
def slot():
    """A slot whose config keeps the tests' ledgers and saved outputs out of the home folder."""
    import toolslot

    s = toolslot.Slot(QUIET)
    yield s
    s.close()
