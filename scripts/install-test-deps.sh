#!/usr/bin/env bash
# Installs the real MCP servers the tests use (pinned versions: these packages change tools and
# schemas between releases) into .test-deps/ at the repository root. Idempotent: a completed
# install leaves a marker and is not repeated.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="$root/.test-deps"
marker="$deps/.installed-v1"
[ -f "$marker" ] && exit 0
mkdir -p "$deps"
echo "installing MCP servers into $deps (npm and PyPI)"
npm install --prefix "$deps/node" --no-audit --no-fund --loglevel=error \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/server-memory@2026.8.31
# One venv, installed sequentially: in parallel on 2 cores these take minutes.
python3 -m venv "$deps/venv"
"$deps/venv/bin/pip" install -q mcp-server-time==2026.10.19 mcp-server-git==2026.10.19 mcp-server-fetch==2026.10.24
touch "$marker"
