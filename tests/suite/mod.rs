mod background;
mod extensions;
mod mcp;
mod pipeline;
mod repair;
mod search_eval;
mod support;
mod tidy;
