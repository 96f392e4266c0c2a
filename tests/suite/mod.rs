mod extensions;
mod mcp;
mod pipeline;
mod support;
mod tidy;
