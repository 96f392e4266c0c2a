"""Adapters that put a toolslot session's tools into the agent frameworks where Python agents
already live: ``openai_agents`` (OpenAI Agents SDK ``FunctionTool``s), ``langgraph`` (a
``ToolNode``-compatible node) and ``pydantic_ai`` (a toolset).

Each runs the framework's tool calls as rounds of the session, so every call is governed as
a call from a raw model stream would be: names and arguments checked, policy and approval,
loop guard, sandbox, truncation, one result per call. Import the adapter you use; each imports
its framework, and only it.
"""
