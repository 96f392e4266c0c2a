//! HTML reduced to readable text, for fetch_url.
//!
//! Hand-written rather than a full HTML engine: the model needs the words and the paragraph
//! breaks, not the layout, and a page's scripts and styles are noise (and a place to hide
//! instructions). Tags become breaks or nothing; the common entities are decoded.

/// The readable text of an HTML document.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 3);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'<' {
            // Skip whole elements whose content is not text.
            let mut skipped = false;
            for tag in ["script", "style", "noscript", "template", "svg", "head"] {
                if lower[i + 1..].starts_with(tag) {
                    let close = format!("</{tag}");
                    match lower[i..].find(&close) {
                        Some(end) => {
                            let after = i + end;
                            i = lower[after..].find('>').map_or(bytes.len(), |g| after + g + 1);
                        }
                        None => i = bytes.len(),
                    }
                    skipped = true;
                    break;
                }
            }
            if skipped {
                continue;
            }
            if lower[i..].starts_with("<!--") {
                i = lower[i..].find("-->").map_or(bytes.len(), |e| i + e + 3);
                continue;
            }
            let end = lower[i..].find('>').map_or(bytes.len(), |e| i + e + 1);
            let name: String = lower[i + 1..end]
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let closing = lower[i + 1..].starts_with('/');
            // A list item or row opens a line; its end adds nothing, or lists would be double spaced.
            if closing && matches!(name.as_str(), "li" | "tr" | "td" | "th") {
                i = end;
                continue;
            }
            if matches!(
                name.as_str(),
                "br" | "p"
                    | "div"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "pre"
                    | "section"
                    | "article"
                    | "table"
                    | "ul"
                    | "ol"
                    | "blockquote"
                    | "hr"
            ) {
                out.push('\n');
            } else if matches!(name.as_str(), "td" | "th") {
                out.push('\t');
            }
            i = end;
            continue;
        }
        let next = html[i..].find('<').map_or(html.len(), |n| i + n);
        out.push_str(&decode_entities(&html[i..next]));
        i = next;
    }
    collapse(&out)
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" => Some('\''),
            "nbsp" => Some(' '),
            e if e.starts_with("#x") || e.starts_with("#X") => u32::from_str_radix(&e[2..], 16).ok().and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse::<u32>().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank_run = 0;
    for line in s.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            blank_run += 1;
            if blank_run == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank_run = 0;
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_become_text() {
        let html = "<html><head><title>T</title><style>p{}</style></head><body><script>alert(1)</script>\
            <h1>Title</h1><p>One &amp; two&nbsp;&lt;three&gt; &#x263A; &#65;</p><!-- hidden --><ul><li>a</li><li>b</li></ul></body></html>";
        assert_eq!(html_to_text(html), "Title\n\nOne & two <three> ☺ A\n\na\nb");
    }
}
