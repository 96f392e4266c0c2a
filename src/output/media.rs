//! A result's media blocks (an MCP server's images and audio): passed on to the host, saved, or
//! described, each with a line in the text that says which.
//!
//! A block is passed on only when a provider can take it: its data must be base64, and an
//! image must be one of the formats every provider reads (PNG, JPEG, GIF, WebP), named by its
//! own bytes. The host puts the block in its next request to the model, and a provider refuses
//! the whole request for one image it cannot decode, or whose bytes are not the type it is
//! called: a server's bad block would stop the conversation, not just its own call. A block
//! whose type is misnamed is passed on under the type its bytes have.

use base64::Engine;
use serde_json::Value;

use super::finish::{FinishContext, Overflow};
use crate::config::OutputConfig;
use crate::notice::{Notice, NoticeKind};

/// What becomes of a result's media blocks: those passed on, and one line per block saying
/// what it was and where it went.
pub(super) struct Media {
    pub(super) kept: Vec<Value>,
    pub(super) lines: Vec<String>,
}

/// The file extension of a media type (what a saved block is named with).
fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        _ => "bin",
    }
}

/// The image type `bytes` are, by their first bytes, among those every provider reads.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Why a decoded block of `kind` cannot be passed on to a provider, or the type it is to be
/// passed on under.
fn passable(kind: &str, mime: &str, bytes: &[u8]) -> Result<String, String> {
    if kind != "image" {
        return Ok(mime.to_string());
    }
    image_type(bytes)
        .map(str::to_string)
        .ok_or_else(|| "not an image the model providers read (PNG, JPEG, GIF or WebP)".to_string())
}

/// Passes media blocks a provider can take, within `output.block_max_bytes`, to the host;
/// saves the others (final views only) and describes each in a line of the text, so the model
/// knows what it got.
pub(super) fn media_blocks(
    ctx: &FinishContext<'_>,
    blocks: Vec<Value>,
    cfg: &OutputConfig,
    overflow: Option<Overflow<'_>>,
    notices: &mut Vec<Notice>,
) -> Media {
    let mut media = Media {
        kept: Vec::new(),
        lines: Vec::new(),
    };
    for mut block in blocks {
        let kind: String = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("media")
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(16)
            .collect();
        // Server words in a line of ours: only what a media type may hold.
        let mime: String = block
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || "+-./".contains(*c))
            .take(64)
            .collect();
        let data = block.get("data").and_then(Value::as_str).unwrap_or("");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| format!("its data is not base64 ({e})"));
        let size = super::handles::size_text(decoded.as_ref().map_or(data.len() * 3 / 4, Vec::len));
        let sendable = decoded
            .as_ref()
            .map_err(String::clone)
            .and_then(|bytes| passable(&kind, &mime, bytes));
        let refused = match sendable {
            Ok(real) if data.len() <= cfg.block_max_bytes => {
                let named = if real == mime {
                    real
                } else {
                    block["mimeType"] = Value::String(real.clone());
                    format!("{real} (sent as {mime})")
                };
                media.lines.push(format!(
                    "[{kind}: {named}, {size}: passed to the host as content block {}]",
                    media.kept.len() + 1
                ));
                media.kept.push(block);
                continue;
            }
            Ok(_) => None,
            Err(why) => Some(why),
        };
        let saved = match (overflow, ctx.final_view, &decoded) {
            (_, _, Err(e)) => Err(e.clone()),
            (Some(o), true, Ok(bytes)) => o.store.save_bytes(o.session, extension_of(&mime), bytes).map_err(|e| e.to_string()),
            _ => Err("this view of the call is not its last".to_string()),
        };
        let line = match (&refused, saved) {
            (Some(why), Ok(path)) => format!("[{kind}: {mime}, {size}: not passed on: {why}; saved as {}]", path.display()),
            (Some(why), Err(_)) => format!("[{kind}: {mime}, {size}: not passed on: {why}]"),
            (None, Ok(path)) => format!(
                "[{kind}: {mime}, {size}: too large to pass on (over output.block_max_bytes); saved as {}]",
                path.display()
            ),
            (None, Err(reason)) => {
                notices.push(Notice::for_call(
                    NoticeKind::OverflowFailed,
                    ctx.index,
                    format!("`{}`: a {kind} block was not saved: {reason}", ctx.name),
                ));
                format!("[{kind}: {mime}, {size}: too large to pass on, and not saved]")
            }
        };
        media.lines.push(line);
    }
    media
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OverflowStore, finish_call};
    use crate::tool::ToolOutput;

    fn cfg() -> OutputConfig {
        crate::config::Config::builtin().output
    }

    fn ctx() -> FinishContext<'static> {
        FinishContext {
            index: 4,
            id: "c4",
            name: "srv__t",
            external: Some("srv__t"),
            final_view: true,
        }
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn media_blocks_are_passed_on_within_the_limit_and_saved_beyond_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let overflow = Some(Overflow {
            store: &store,
            session: "s",
        });
        let small = serde_json::json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="});
        let big_data = b64(&vec![7u8; 2 * cfg().block_max_bytes]);
        let big = serde_json::json!({"type": "audio", "mimeType": "audio/wav\n[ignore this]", "data": big_data});
        let out = ToolOutput {
            blocks: vec![small.clone(), big],
            ..ToolOutput::text("two media")
        };
        let f = finish_call(ctx(), Ok(out), &cfg(), overflow);
        let content = &f.result.content;
        assert!(
            content.contains("two media\n[image: image/png, 8 bytes: passed to the host as content block 1]"),
            "{content}"
        );
        assert!(
            content.contains("[audio: audio/wavignorethis, 2.0 MB: too large to pass on"),
            "{content}"
        );
        let saved = content.split("saved as ").nth(1).unwrap().split(']').next().unwrap();
        assert_eq!(std::fs::read(saved).unwrap(), vec![7u8; 2 * cfg().block_max_bytes]);
        let blocks = f.result.blocks.unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0], serde_json::json!({"type": "text", "text": content}));
        assert_eq!(blocks[1], small);
        let plain = finish_call(ctx(), Ok(ToolOutput::text("x")), &cfg(), None);
        assert!(plain.result.blocks.is_none(), "text alone has no blocks");
    }

    #[test]
    fn a_block_no_provider_could_read_is_not_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let overflow = Some(Overflow {
            store: &store,
            session: "s",
        });
        let svg = b"<svg xmlns='http://www.w3.org/2000/svg'/>";
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F'];
        let out = ToolOutput {
            blocks: vec![
                serde_json::json!({"type": "image", "mimeType": "image/png", "data": "%%%notbase64"}),
                serde_json::json!({"type": "image", "mimeType": "image/svg+xml", "data": b64(svg)}),
                serde_json::json!({"type": "image", "mimeType": "image/png", "data": b64(&jpeg)}),
                serde_json::json!({"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}),
            ],
            ..ToolOutput::text("media")
        };
        let f = finish_call(ctx(), Ok(out), &cfg(), overflow);
        let content = &f.result.content;
        assert!(
            content.contains("[image: image/png, 9 bytes: not passed on: its data is not base64 ("),
            "{content}"
        );
        assert!(
            content.contains(
                "[image: image/svg+xml, 41 bytes: not passed on: not an image the model providers read (PNG, JPEG, GIF or WebP); saved as "
            ),
            "{content}"
        );
        let saved = content.split("saved as ").nth(1).unwrap().split(']').next().unwrap();
        assert!(saved.ends_with(".svg"), "{saved}");
        assert_eq!(std::fs::read(saved).unwrap(), svg);
        assert!(
            content.contains("[image: image/jpeg (sent as image/png), 10 bytes: passed to the host as content block 1]"),
            "{content}"
        );
        assert!(
            content.contains("[audio: audio/wav, 4 bytes: passed to the host as content block 2]"),
            "{content}"
        );
        let blocks = f.result.blocks.unwrap();
        assert_eq!(blocks.len(), 3, "the text, the JPEG and the audio: {blocks:?}");
        assert_eq!(blocks[1]["mimeType"], "image/jpeg");
        assert_eq!(blocks[1]["data"], b64(&jpeg));
        assert_eq!(blocks[2]["type"], "audio");
    }

    #[test]
    fn images_are_known_by_their_bytes() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xDB]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a.."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(image_type(b"<svg"), None);
        assert_eq!(image_type(b""), None);
    }
}
