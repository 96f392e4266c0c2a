//! The media a result carries beside its text, read from `ToolResult::blocks`.

use serde_json::Value;

use crate::event::ToolResult;

/// One image or audio block of a result (`{"type", "mimeType", "data"}`, base64 data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Media<'a> {
    /// `image` or `audio`.
    pub kind: &'a str,
    /// The MIME type.
    pub mime: &'a str,
    /// Base64 bytes.
    pub data: &'a str,
}

/// The result's images, in its order; audio and malformed blocks are left to the text, which
/// already names each media block.
pub(super) fn images(result: &ToolResult) -> Vec<Media<'_>> {
    let Some(blocks) = &result.blocks else {
        return Vec::new();
    };
    blocks.iter().filter_map(media).filter(|m| m.kind == "image").collect()
}

fn media(block: &Value) -> Option<Media<'_>> {
    Some(Media {
        kind: block.get("type")?.as_str()?,
        mime: block.get("mimeType")?.as_str()?,
        data: block.get("data")?.as_str()?,
    })
}
