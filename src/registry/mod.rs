//! One registry for every tool source, fail-closed admission, and the model-facing catalog.
//!
//! A [`RegistryBuilder`] takes tools from anywhere (built-ins, MCP servers, extensions,
//! sub-agents) as `Arc<dyn ToolSpec>` and admits each one: a tool with a bad name, a schema
//! whose root is not an object or does not compile, or a duplicate name is replaced by a
//! [`FailClosedTool`] that answers every call "unavailable", so one bad tool never breaks the
//! catalog or the process. The built [`Registry`] is immutable; per-session activations of
//! deferred tools live in a [`Catalog`] value.
//!
//! # Example
//! ```
//! use toolslot::{config::Config, registry::RegistryBuilder};
//! let cfg = std::sync::Arc::new(Config::builtin());
//! let registry = RegistryBuilder::new(cfg.clone()).extend(toolslot::builtin::enabled(&cfg)).build();
//! assert!(registry.get("tool_search").is_some());
//! ```

mod catalog;
mod fail_closed;
mod live;
mod search;

// Names are looked up several times per call; FxHash is several times faster than SipHash
// on short keys, and the keys are tool names we admitted, not attacker-chosen input.
type NameMap = rustc_hash::FxHashMap<String, usize>;
use std::sync::Arc;

use serde_json::Value;

pub use crate::tool_name::{is_valid_tool_name, sanitize_tool_name};
pub use catalog::{Catalog, CatalogFormat};
pub use fail_closed::{FAIL_CLOSED_DESCRIPTION, FailClosedTool};
pub use live::LiveRegistry;
pub use search::{SearchDoc, SearchHit, SearchIndex, query_too_long, semantic};

use crate::config::Config;
use crate::notice::{Notice, NoticeKind};
use crate::schema::{NullableStyle, clean_schema};
use crate::tool::{ToolError, ToolMetadata, ToolSpec};

/// A tool admitted to the registry, with what was computed once at admission.
pub struct RegisteredTool {
    /// The tool.
    pub spec: Arc<dyn ToolSpec>,
    /// Its scheduling snapshot.
    pub meta: ToolMetadata,
    /// The compiled validator of its own (uncleaned) schema.
    validator: Option<Arc<jsonschema::Validator>>,
    /// The tool's own schema, read once at admission.
    pub input_schema: Value,
    /// The description the model sees (capped, control characters removed).
    pub model_description: String,
    /// The cleaned schema the model sees.
    pub model_schema: Value,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool").field("meta", &self.meta).finish_non_exhaustive()
    }
}

impl RegisteredTool {
    /// Validates arguments: the JSON Schema first, then the tool's own semantic checks.
    ///
    /// # Errors
    /// An `invalid_input` [`ToolError`] whose `field` is the JSON pointer of the first
    /// offending value (for a missing property, the property's name) and whose message says
    /// what was expected.
    pub fn validate_input(&self, input: &Value) -> Result<(), ToolError> {
        if let Some(validator) = &self.validator
            && let Some(err) = validator.iter_errors(input).next()
        {
            let mut field = err.instance_path().to_string();
            if let jsonschema::error::ValidationErrorKind::Required { property } = err.kind() {
                let name = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
                field = if field.is_empty() { name } else { format!("{field}/{name}") };
            }
            let field = field.trim_start_matches('/').to_string();
            let shown = if field.is_empty() {
                "(the arguments)".to_string()
            } else {
                format!("`{field}`")
            };
            return Err(ToolError::invalid(
                field.clone(),
                format!(
                    "Invalid arguments for `{}`: {shown}: {err}. Expected arguments matching: {}",
                    self.meta.name, self.model_schema
                ),
            ));
        }
        self.spec.check_input(input)
    }
}

/// Assembles a [`Registry`]. The same builder builds sub-agents' tool surfaces.
pub struct RegistryBuilder {
    config: Arc<Config>,
    /// Tools whose names are reserved: admitted before any other (built-ins, spawn_agent,
    /// and whatever a host reserves), so no extension or server can take their names.
    reserved: Vec<Arc<dyn ToolSpec>>,
    tools: Vec<Arc<dyn ToolSpec>>,
    failed: Vec<(String, String, crate::tool::ToolSource)>,
}

impl RegistryBuilder {
    /// A builder with no tools.
    pub fn new(config: Arc<Config>) -> Self {
        Self {
            config,
            reserved: Vec::new(),
            tools: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// Adds one tool from any source. A built-in's (or a sub-agent tool's) name is reserved:
    /// it is admitted before every extension and server tool, whatever the order of calls.
    pub fn with_tool(mut self, tool: Arc<dyn ToolSpec>) -> Self {
        if matches!(tool.source(), crate::tool::ToolSource::Builtin | crate::tool::ToolSource::Subagent) {
            self.reserved.push(tool);
        } else {
            self.tools.push(tool);
        }
        self
    }

    /// Adds tools whose names are reserved like a built-in's, whatever their source (a
    /// host's own helpers, such as the MCP discovery tools).
    pub fn reserve(mut self, tools: impl IntoIterator<Item = Arc<dyn ToolSpec>>) -> Self {
        self.reserved.extend(tools);
        self
    }

    /// Records a tool that could not even be constructed (a bad extension declaration): it
    /// is listed fail-closed under `name` with `reason`, like any tool that fails admission.
    pub fn with_failed(mut self, name: &str, reason: String, source: crate::tool::ToolSource) -> Self {
        self.failed.push((name.to_string(), reason, source));
        self
    }

    /// Adds several tools (see [`RegistryBuilder::with_tool`]).
    pub fn extend(self, tools: impl IntoIterator<Item = Arc<dyn ToolSpec>>) -> Self {
        tools.into_iter().fold(self, Self::with_tool)
    }

    /// Replaces the tools added so far by what `f` makes of them: a host that runs some tools
    /// elsewhere wraps them, keeping their definitions.
    /// Reserved names stay reserved.
    pub fn map_tools(mut self, mut f: impl FnMut(Vec<Arc<dyn ToolSpec>>) -> Vec<Arc<dyn ToolSpec>>) -> Self {
        self.reserved = f(std::mem::take(&mut self.reserved));
        self.tools = f(std::mem::take(&mut self.tools));
        self
    }

    /// Admits every tool and builds the registry. Never fails: a bad tool fails closed.
    pub fn build(self) -> Registry {
        let mut admission = Admission::new(&self.config, Vec::new(), NameMap::default());
        // Reserved names first: a declaration that names a built-in never takes its name.
        for tool in self.reserved {
            admission.admit(tool);
        }
        // Tools that could not be constructed go through the same fail-closed path as tools
        // that fail admission, next, so a good tool cannot take their name.
        for (name, reason, source) in self.failed {
            admission.fail_closed(&name, reason, source);
        }
        for tool in self.tools {
            admission.admit(tool);
        }
        let Admission {
            admitted,
            by_name,
            notices,
            ..
        } = admission;
        Registry::from_admitted(self.config, admitted, by_name, notices)
    }
}

/// Admission of tools into a growing list, shared by a first build and later appends.
struct Admission {
    policy: crate::config::NetworkPolicy,
    description_cap: usize,
    admitted: Vec<Arc<RegisteredTool>>,
    by_name: NameMap,
    notices: Vec<Notice>,
}

impl Admission {
    fn new(config: &Config, admitted: Vec<Arc<RegisteredTool>>, by_name: NameMap) -> Self {
        Self {
            policy: config.network.policy,
            description_cap: config.catalog.description_max_chars,
            admitted,
            by_name,
            notices: Vec::new(),
        }
    }

    fn admit(&mut self, spec: Arc<dyn ToolSpec>) {
        if let Some(reason) = spec.fail_closed_reason() {
            // A stand-in its source made (a malformed listing entry): listed and reported
            // like any tool that fails admission.
            let reason = reason.to_string();
            self.fail_closed(spec.name(), reason, spec.source());
            return;
        }
        match admission_problem(spec.as_ref(), &self.by_name) {
            Some(reason) => self.fail_closed(spec.name(), reason, spec.source()),
            None => {
                let validator = jsonschema::validator_for(&spec.input_schema()).ok().map(Arc::new);
                if let Some(note) = spec.admission_note() {
                    self.notices
                        .push(Notice::new(NoticeKind::ToolAdjusted, format!("tool `{}`: {note}", spec.name())));
                }
                self.push(spec, validator);
            }
        }
    }

    fn fail_closed(&mut self, name: &str, mut reason: String, source: crate::tool::ToolSource) {
        let mut safe = sanitize_tool_name(name);
        if let Some(holder) = self.by_name.get(&safe).map(|i| self.admitted[*i].meta.source) {
            reason.push_str(&format!("; the name `{safe}` belongs to a {} tool", source_word(holder)));
        }
        let mut n = 2;
        while self.by_name.contains_key(&safe) {
            safe = format!("{}_{n}", sanitize_tool_name(name).chars().take(60).collect::<String>());
            n += 1;
        }
        tracing::warn!(tool = %name, %reason, "tool failed closed");
        self.notices.push(Notice::new(
            NoticeKind::FailClosedTool,
            format!("tool `{name}` failed closed (listed as `{safe}`): {reason}"),
        ));
        self.push(Arc::new(FailClosedTool::new(safe, name.to_string(), reason, source)), None);
    }

    fn push(&mut self, spec: Arc<dyn ToolSpec>, validator: Option<Arc<jsonschema::Validator>>) {
        let meta = ToolMetadata::of(spec.as_ref(), self.policy);
        let model_description = model_description(spec.description(), self.description_cap);
        let input_schema = spec.input_schema();
        let model_schema = clean_schema(&input_schema, NullableStyle::TypeArray);
        self.by_name.insert(meta.name.clone(), self.admitted.len());
        self.admitted.push(Arc::new(RegisteredTool {
            spec,
            meta,
            validator,
            input_schema,
            model_description,
            model_schema,
        }));
    }
}

/// Why a tool may not be admitted, or `None` when it may.
fn admission_problem(spec: &dyn ToolSpec, by_name: &NameMap) -> Option<String> {
    let name = spec.name();
    if !is_valid_tool_name(name) {
        return Some(format!("name `{name}` does not match ^[a-zA-Z0-9_-]{{1,64}}$"));
    }
    if by_name.contains_key(name) {
        return Some(format!("name `{name}` is already taken by another tool"));
    }
    let schema = spec.input_schema();
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => {
            return Some("input schema root is not an object schema (`\"type\": \"object\"`)".into());
        }
    }
    if let Err(e) = jsonschema::validator_for(&schema) {
        return Some(format!("input schema does not compile: {e}"));
    }
    None
}

fn source_word(source: crate::tool::ToolSource) -> &'static str {
    match source {
        crate::tool::ToolSource::Builtin => "built-in",
        crate::tool::ToolSource::Mcp => "MCP",
        crate::tool::ToolSource::Extension => "extension",
        crate::tool::ToolSource::Subagent => "sub-agent",
    }
}

/// Caps a description and removes control characters (kept: newline and tab).
fn model_description(text: &str, max_chars: usize) -> String {
    let cleaned: String = text.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
    if max_chars == 0 || cleaned.chars().count() <= max_chars {
        return cleaned;
    }
    let mut cut: String = cleaned.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The admitted tools of every source, one generation of them. Immutable once built; cheap
/// to share behind an `Arc`. A later generation ([`Registry::appended`]) only adds tools.
pub struct Registry {
    config: Arc<Config>,
    generation: u64,
    tools: Vec<Arc<RegisteredTool>>,
    by_name: NameMap,
    /// Indices of the first generation's resident (not deferred) tools, sorted by name.
    resident: Vec<usize>,
    /// Resident tools admitted by later generations, in admission order: they are appended
    /// after the rendered block, never sorted into it.
    late: Vec<usize>,
    /// Every tool name, sorted, for deterministic name repair and suggestions.
    sorted_names: Vec<String>,
    notices: Vec<Notice>,
    search: Option<Arc<SearchIndex>>,
    resident_catalog: Arc<catalog::RenderedBlock>,
    /// Built on the first name that needs the ladder (most generations never do).
    name_index: std::sync::OnceLock<crate::repair::names::NameIndex>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("generation", &self.generation)
            .field("tools", &self.sorted_names)
            .finish_non_exhaustive()
    }
}

impl Registry {
    fn from_admitted(config: Arc<Config>, tools: Vec<Arc<RegisteredTool>>, by_name: NameMap, notices: Vec<Notice>) -> Self {
        let mut registry = Self {
            config,
            generation: 0,
            tools,
            by_name,
            resident: Vec::new(),
            late: Vec::new(),
            sorted_names: Vec::new(),
            notices,
            search: None,
            resident_catalog: Arc::new(catalog::RenderedBlock::new(std::iter::empty())),
            name_index: std::sync::OnceLock::new(),
        };
        // The first generation's resident tools, in name order, are rendered once and shared
        // by every later generation.
        let sorted = registry.index();
        let tools = &registry.tools;
        registry.resident = sorted.into_iter().filter(|i| !tools[*i].meta.deferred).collect();
        registry.resident_catalog = Arc::new(catalog::RenderedBlock::new(registry.resident.iter().map(|i| tools[*i].as_ref())));
        registry
    }

    /// Recomputes what derives from the whole tool list (sorted names, the search index);
    /// returns the tool indices in name order.
    fn index(&mut self) -> Vec<usize> {
        let tools = &self.tools;
        let mut sorted: Vec<usize> = (0..tools.len()).collect();
        sorted.sort_by(|a, b| tools[*a].meta.name.cmp(&tools[*b].meta.name));
        self.sorted_names = sorted.iter().map(|i| tools[*i].meta.name.clone()).collect();
        let deferred: Vec<SearchDoc> = sorted
            .iter()
            .filter(|i| tools[**i].meta.deferred)
            .map(|i| {
                let t = &tools[*i];
                SearchDoc::new(t.meta.name.clone(), t.model_description.clone())
                    .with_title(t.spec.title())
                    .with_schema(&t.model_schema)
            })
            .collect();
        self.search = (!deferred.is_empty()).then(|| Arc::new(SearchIndex::configured(deferred, &self.config.search)));
        sorted
    }

    /// The next generation: these tools admitted after the existing ones. A tool whose name
    /// is already taken is skipped (a server re-listing what it offered before), not failed
    /// closed; a bad new tool fails closed like at a first build. `None` when nothing is new.
    pub fn appended(&self, tools: impl IntoIterator<Item = Arc<dyn ToolSpec>>) -> Option<(Registry, Vec<Notice>)> {
        let mut admission = Admission::new(&self.config, self.tools.clone(), self.by_name.clone());
        let before = self.tools.len();
        for tool in tools {
            if !admission.by_name.contains_key(tool.name()) {
                admission.admit(tool);
            }
        }
        if admission.admitted.len() == before {
            return None;
        }
        let Admission {
            admitted,
            by_name,
            notices,
            ..
        } = admission;
        let mut late = self.late.clone();
        late.extend((before..admitted.len()).filter(|i| !admitted[*i].meta.deferred));
        let mut all_notices = self.notices.clone();
        all_notices.extend(notices.iter().cloned());
        let mut next = Registry {
            config: Arc::clone(&self.config),
            generation: self.generation + 1,
            tools: admitted,
            by_name,
            resident: self.resident.clone(),
            late,
            sorted_names: Vec::new(),
            notices: all_notices,
            search: None,
            resident_catalog: Arc::clone(&self.resident_catalog),
            name_index: std::sync::OnceLock::new(),
        };
        next.index();
        Some((next, notices))
    }

    /// 0 for a first build; one more for each [`Registry::appended`].
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The tool called exactly `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|i| self.tools[*i].as_ref())
    }

    /// Every admitted tool, in admission order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter().map(AsRef::as_ref)
    }

    /// Every tool name, sorted.
    pub fn names(&self) -> &[String] {
        &self.sorted_names
    }

    /// Every tool name, indexed for the name ladder (built once per generation, on first use).
    pub fn name_index(&self) -> &crate::repair::names::NameIndex {
        self.name_index
            .get_or_init(|| crate::repair::names::NameIndex::new(self.sorted_names.iter().cloned()))
    }

    /// Metadata snapshots of every tool, sorted by name.
    pub fn metadata(&self) -> Vec<ToolMetadata> {
        self.sorted_names
            .iter()
            .filter_map(|n| self.get(n))
            .map(|t| t.meta.clone())
            .collect()
    }

    /// Notices raised at admission (`fail_closed_tool`).
    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    /// The search index over deferred tools, if any are deferred.
    pub fn search_index(&self) -> Option<Arc<SearchIndex>> {
        self.search.clone()
    }

    /// The catalog before any activation (generation 0).
    pub fn catalog(self: &Arc<Self>) -> Catalog {
        Catalog::new(Arc::clone(self))
    }

    /// Whether any tool is deferred.
    pub fn has_deferred(&self) -> bool {
        self.search.is_some()
    }

    pub(crate) fn resident_block(&self) -> &catalog::RenderedBlock {
        &self.resident_catalog
    }

    /// Names of the first generation's resident tools, in catalog order.
    pub(crate) fn resident_names(&self) -> impl Iterator<Item = &str> {
        self.resident.iter().map(|i| self.tools[*i].meta.name.as_str())
    }

    /// Resident tools admitted by later generations, in admission order.
    pub(crate) fn late_tools(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.late.iter().map(|i| self.tools[*i].as_ref())
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
