//! The allow rule `approve_for_project` adds to a project's policy file, written into the
//! file's own text so that its comments, order and layout stay as the team wrote them.

use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, value};

/// `existing` (a project policy file's text, "" when there is none) with an allow rule for
/// calls of `tool` whose approval key is `key`, preceded by the comment `note`. Unchanged
/// when the same rule is already there.
///
/// # Errors
/// Why the text cannot take the rule: it is not TOML, or `policy` / `policy.rules` is not a
/// table / an array of tables.
pub fn with_allow_rule(existing: &str, tool: &str, key: &str, note: &str) -> Result<String, String> {
    let mut doc: DocumentMut = existing.parse().map_err(|e: toml_edit::TomlError| e.message().to_string())?;
    let policy = doc
        .entry("policy")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or("`policy` is not a table")?;
    let same = |t: &dyn toml_edit::TableLike| {
        t.get("tool").and_then(Item::as_str) == Some(tool)
            && t.get("decision").and_then(Item::as_str) == Some("allow")
            && t.get("key").and_then(Item::as_str) == Some(key)
            && t.len() <= 4
    };
    match policy.get_mut("rules") {
        None => {
            let mut rules = ArrayOfTables::new();
            rules.push(rule_table(tool, key, note));
            policy.insert("rules", Item::ArrayOfTables(rules));
        }
        Some(Item::ArrayOfTables(rules)) => {
            if rules.iter().any(|t| same(t)) {
                return Ok(existing.to_string());
            }
            rules.push(rule_table(tool, key, note));
        }
        Some(Item::Value(toml_edit::Value::Array(rules))) => {
            if rules.iter().filter_map(toml_edit::Value::as_inline_table).any(|t| same(t)) {
                return Ok(existing.to_string());
            }
            let mut t = InlineTable::new();
            t.insert("tool", tool.into());
            t.insert("decision", "allow".into());
            t.insert("key", key.into());
            rules.push(t);
        }
        Some(_) => return Err("`policy.rules` is not an array of tables".into()),
    }
    Ok(doc.to_string())
}

fn rule_table(tool: &str, key: &str, note: &str) -> Table {
    let mut t = Table::new();
    t.insert("tool", value(tool));
    t.insert("decision", value("allow"));
    t.insert("key", value(key));
    let comment: String = note.lines().map(|l| format!("# {l}\n")).collect();
    t.decor_mut().set_prefix(format!("\n{comment}"));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_added_and_the_file_keeps_its_comments() {
        let before = "# Our team's rules.\n[[policy.rules]]\ntool = \"exec_shell\" # the shell\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\n";
        let after = with_allow_rule(before, "exec_shell", "exec_shell:cargo build", "approved for the project").unwrap();
        assert!(after.starts_with(before), "{after}");
        assert!(after.contains("# approved for the project\n[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\nkey = \"exec_shell:cargo build\""), "{after}");
        let parsed: toml::Value = toml::from_str(&after).unwrap();
        assert_eq!(parsed["policy"]["rules"].as_array().unwrap().len(), 2);
        assert_eq!(
            with_allow_rule(&after, "exec_shell", "exec_shell:cargo build", "again").unwrap(),
            after,
            "added once"
        );
    }

    #[test]
    fn an_empty_file_gets_a_rule_and_odd_files_are_refused() {
        let text = with_allow_rule("", "write_file", "write_file:src/a.rs", "n").unwrap();
        let parsed: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(parsed["policy"]["rules"][0]["key"].as_str(), Some("write_file:src/a.rs"));
        let inline = with_allow_rule("[policy]\nrules = []\n", "t", "k", "n").unwrap();
        let parsed: toml::Value = toml::from_str(&inline).unwrap();
        assert_eq!(parsed["policy"]["rules"][0]["tool"].as_str(), Some("t"));
        assert!(with_allow_rule("policy = 3\n", "t", "k", "n").is_err());
        assert!(with_allow_rule("[policy]\nrules = 3\n", "t", "k", "n").is_err());
        assert!(with_allow_rule("not toml [", "t", "k", "n").is_err());
    }
}
