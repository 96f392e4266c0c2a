//! The built-in tools, each a plain `ToolSpec` in its own file.

mod tool_search;

use std::sync::Arc;

use crate::tool::ToolSpec;

pub use tool_search::ToolSearch;

/// Every built-in tool, in a fixed order.
pub fn all() -> Vec<Arc<dyn ToolSpec>> {
    vec![Arc::new(ToolSearch)]
}
