//! The model-facing catalog: rendered once per generation, appended to, never reordered.
//!
//! Providers cache the prompt prefix byte for byte, and the tool list sits at its front. So
//! the resident tools are sorted by name and rendered once; a deferred tool activated by
//! tool_search, or a tool a server added later, is appended after them in the order it became
//! visible, and a new generation's bytes start with the previous generation's bytes (less the
//! closing `]`).

use std::sync::{Arc, OnceLock};

use serde_json::json;

use super::{RegisteredTool, Registry};

/// The provider shape a catalog is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogFormat {
    /// `[{name, description, input_schema}]` (Anthropic Messages).
    Anthropic,
    /// `[{type: "function", function: {name, description, parameters}}]` (OpenAI).
    OpenAi,
}

impl std::str::FromStr for CatalogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "anthropic" => Ok(Self::Anthropic),
            "openai" => Ok(Self::OpenAi),
            other => Err(format!("unknown catalog format `{other}` (expected anthropic or openai)")),
        }
    }
}

/// One tool's entry in each format, rendered once.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    anthropic: String,
    openai: String,
}

impl Entry {
    pub(crate) fn of(tool: &RegisteredTool) -> Self {
        let name = &tool.meta.name;
        let anthropic = json!({
            "name": name,
            "description": tool.model_description,
            "input_schema": tool.model_schema,
        });
        let openai = json!({
            "type": "function",
            "function": {"name": name, "description": tool.model_description, "parameters": tool.model_schema},
        });
        Self {
            anthropic: anthropic.to_string(),
            openai: openai.to_string(),
        }
    }

    fn get(&self, format: CatalogFormat) -> &str {
        match format {
            CatalogFormat::Anthropic => &self.anthropic,
            CatalogFormat::OpenAi => &self.openai,
        }
    }
}

/// The resident tools' entries, sorted by name, rendered at registry build.
#[derive(Debug)]
pub(crate) struct RenderedBlock {
    entries: Vec<Entry>,
}

impl RenderedBlock {
    pub(crate) fn new<'a>(tools: impl Iterator<Item = &'a RegisteredTool>) -> Self {
        Self {
            entries: tools.map(Entry::of).collect(),
        }
    }
}

/// A session's view of the catalog: the resident tools, then whatever became visible later
/// (deferred tools it activated, tools a newer registry generation added), in the order they
/// became visible. Cloning is cheap; [`Catalog::activate`] and [`Catalog::adopt`] make the
/// next generation.
#[derive(Clone)]
pub struct Catalog {
    registry: Arc<Registry>,
    /// Entries after the resident block, in the order they became visible, rendered once each.
    tail: Vec<(String, Arc<Entry>)>,
    rendered: Arc<[OnceLock<Arc<str>>; 2]>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        let mut catalog = Self {
            registry,
            tail: Vec::new(),
            rendered: Arc::new(Default::default()),
        };
        // A catalog opened on a later registry generation shows its late tools after the
        // resident block, as a session that saw them arrive would.
        catalog.tail = catalog
            .registry
            .late_tools()
            .map(|t| (t.meta.name.clone(), Arc::new(Entry::of(t))))
            .collect();
        catalog
    }

    /// How many entries follow the resident block; 0 for the resident catalog.
    pub fn generation(&self) -> usize {
        self.tail.len()
    }

    /// The registry generation this catalog was made from.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether the model can call `name` now (resident or activated).
    pub fn contains(&self, name: &str) -> bool {
        self.registry.get(name).is_some_and(|t| !t.meta.deferred) || self.tail.iter().any(|(n, _)| n == name)
    }

    /// The names the model sees, in catalog order.
    pub fn visible_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.registry.resident_names().map(str::to_string).collect();
        names.extend(self.tail.iter().map(|(n, _)| n.clone()));
        names
    }

    /// The next generation with `names` activated. Unknown, resident or already activated
    /// names are skipped; with nothing new, the same generation (and its cache) comes back.
    pub fn activate(&self, names: &[String]) -> Catalog {
        let mut next = self.tail.clone();
        for name in names {
            let Some(tool) = self.registry.get(name) else {
                continue;
            };
            if !tool.meta.deferred || next.iter().any(|(n, _)| n == name) {
                continue;
            }
            next.push((name.clone(), Arc::new(Entry::of(tool))));
        }
        self.with_tail(Arc::clone(&self.registry), next)
    }

    /// This catalog moved to a newer registry generation: the resident tools it added are
    /// appended after everything already visible; deferred ones only become searchable.
    pub fn adopt(&self, registry: Arc<Registry>) -> Catalog {
        let mut next = self.tail.clone();
        for tool in registry.late_tools() {
            if !next.iter().any(|(n, _)| *n == tool.meta.name) {
                next.push((tool.meta.name.clone(), Arc::new(Entry::of(tool))));
            }
        }
        self.with_tail(registry, next)
    }

    fn with_tail(&self, registry: Arc<Registry>, tail: Vec<(String, Arc<Entry>)>) -> Catalog {
        // The bytes depend on the tail only, so an unchanged tail keeps the rendered cache.
        let rendered = if tail.len() == self.tail.len() {
            Arc::clone(&self.rendered)
        } else {
            Arc::new(Default::default())
        };
        Catalog { registry, tail, rendered }
    }

    /// The catalog's bytes in `format`: serialized once per generation and format, then
    /// shared.
    pub fn render(&self, format: CatalogFormat) -> Arc<str> {
        let slot = match format {
            CatalogFormat::Anthropic => &self.rendered[0],
            CatalogFormat::OpenAi => &self.rendered[1],
        };
        Arc::clone(slot.get_or_init(|| {
            let block = self.registry.resident_block();
            let mut out = String::with_capacity(64 * (block.entries.len() + self.tail.len()) + 2);
            out.push('[');
            let entries = block.entries.iter().chain(self.tail.iter().map(|(_, e)| e.as_ref()));
            for (i, entry) in entries.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(entry.get(format));
            }
            out.push(']');
            Arc::from(out)
        }))
    }
}
