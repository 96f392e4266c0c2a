mod background;
mod extensions;
mod mcp;
mod pipeline;
mod search_eval;
mod support;
mod tidy;
