"""An extension tool: counts the words of a file in the workspace.

toolslot runs it with the JSON arguments on stdin and reads {"content", "is_error"} from stdout.
"""
import json
import pathlib
import sys

args = json.load(sys.stdin)
path = pathlib.Path(args.get("path", ""))
if path.is_absolute() or ".." in path.parts or not path.is_file():
    print(json.dumps({"content": f"no such file in the workspace: {path}", "is_error": True}))
else:
    text = path.read_text(errors="replace")
    print(json.dumps({"content": f"{len(text.split())} words, {len(text.splitlines())} lines", "is_error": False}))
