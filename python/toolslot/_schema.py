"""JSON Schema of a Python function's arguments, read from its type hints."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, List, Tuple

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _schema_of(hint: Any) -> Dict[str, Any]:
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema_of(options[0])
        return {"anyOf": [_schema_of(a) for a in args]}
    if origin in (list, List, tuple, Tuple, set, frozenset) or hint in (list, tuple, set):
        item = _schema_of(args[0]) if args else {}
        return {"type": "array", "items": item} if item else {"type": "array"}
    if origin in (dict, Dict) or hint is dict:
        return {"type": "object"}
    if isinstance(hint, type) and hasattr(hint, "model_json_schema"):
        # A pydantic model describes itself.
        return hint.model_json_schema()
    return {}


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)


def schema_of(fn: Callable[..., Any]) -> Dict[str, Any]:
    """An object schema with one property per parameter; those without a default (and not
    ``Optional``) are required. ``*args``/``**kwargs`` are refused: the model sends names."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: read it as untyped
        hints = {}
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool `{fn.__name__}`: *{name} cannot be given by a model; name every parameter")
        hint = hints.get(name, param.annotation)
        prop = _schema_of(hint)
        if param.default is not inspect.Parameter.empty:
            if param.default is None or isinstance(param.default, (str, int, float, bool)):
                prop = {**prop, "default": param.default}
        elif not _optional(hint):
            required.append(name)
        properties[name] = prop
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def description_of(fn: Callable[..., Any]) -> str:
    """The function's docstring, cleaned; its name when it has none."""
    return inspect.getdoc(fn) or fn.__name__.replace("_", " ")
