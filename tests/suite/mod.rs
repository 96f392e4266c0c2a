mod pipeline;
mod support;
mod tidy;
