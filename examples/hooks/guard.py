#!/usr/bin/env python3
"""A toolslot hook: one JSON object on stdin, the answer in the exit status and stdout.

pre_tool_use: shell commands that pipe a download into a shell are blocked (exit 2, the reason
on stderr is what the model reads); `pip install` is rewritten to refuse packages without
hashes (the rewritten input is judged and approved again as it now is).
post_tool_use: a result holding a private key is withheld (exit 2); other shell results get a
reminder appended (additional_context).

Declare it in the config (see examples/hooks.toml). A hook that crashes, hangs or prints
anything but a JSON object blocks the call unless its table says on_error = "allow".
"""
import json
import re
import sys

call = json.load(sys.stdin)
tool, event = call["tool"], call["event"]
command = call["input"].get("command", "") if tool == "exec_shell" else ""

if event == "pre_tool_use":
    if re.search(r"(curl|wget)[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b", command):
        print("piping a download into a shell is not allowed; download, read, then run", file=sys.stderr)
        sys.exit(2)
    if re.match(r"^pip3? install ", command) and "--require-hashes" not in command:
        updated = dict(call["input"], command=command + " --require-hashes")
        print(json.dumps({"updated_input": updated, "reason": "pip installs must pin hashes"}))
    sys.exit(0)

if event == "post_tool_use":
    if "PRIVATE KEY-----" in call["result"]["content"]:
        print("the result held a private key and was withheld", file=sys.stderr)
        sys.exit(2)
    if tool == "exec_shell":
        print(json.dumps({"additional_context": "(checked by examples/hooks/guard.py)"}))
    sys.exit(0)
