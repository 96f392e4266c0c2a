//! Loading in layers: the built-in defaults, then the `--config` file, then `TOOLSLOT_*`
//! variables, each layer checked so that its errors name where the bad key came from.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

/// The built-in defaults, the same bytes as `config/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

impl Config {
    /// Loads the built-in defaults, overlaid by `file` and then by `TOOLSLOT_*` variables.
    ///
    /// # Errors
    /// [`ConfigError::File`] when the file is unreadable, malformed or holds an unknown key or
    /// a value of the wrong type; [`ConfigError::Env`] when an environment variable does.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(file, std::env::vars())
    }

    /// As [`Config::load`], with the environment given explicitly (tests use this).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load_with_env(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let defaults = config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml).required(true);
        let mut builder = config::Config::builder().add_source(defaults.clone());
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        // The file layer is checked alone first so its errors name the file, not "the config".
        let without_env: Config = builder.clone().build().and_then(|c| c.try_deserialize()).map_err(|e| match file {
            Some(path) => ConfigError::File {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
            None => ConfigError::Builtin(e.to_string()),
        })?;
        let vars: config::Map<String, String> = env.into_iter().filter(|(k, _)| k.starts_with("TOOLSLOT_")).collect();
        if vars.is_empty() {
            return without_env.validated().map(|c| c.loaded_from(file));
        }
        let names: Vec<String> = vars.keys().cloned().collect();
        let env_source = config::Environment::with_prefix("TOOLSLOT")
            .prefix_separator("_")
            .separator("__")
            .list_separator(",")
            .with_list_parse_key("network.allow_hosts")
            .with_list_parse_key("server.allowed_hosts")
            .with_list_parse_key("server.allowed_origins")
            .with_list_parse_key("tools.disable")
            .with_list_parse_key("loop_guard.exempt")
            .try_parsing(true)
            .source(Some(vars));
        builder
            .add_source(env_source)
            .build()
            .and_then(|c| c.try_deserialize::<Config>())
            .map_err(|e| ConfigError::Env {
                vars: names.join(", "),
                reason: e.to_string(),
            })?
            .validated()
            .map(|c| c.loaded_from(file))
    }

    fn loaded_from(mut self, file: Option<&Path>) -> Self {
        self.source_file = file.map(Path::to_path_buf);
        self
    }

    /// The built-in defaults alone; they are tested to load, so this cannot fail at run time.
    pub fn builtin() -> Config {
        match Self::load_with_env(None, std::iter::empty()) {
            Ok(c) => c,
            // The defaults are compiled in and covered by a unit test; reaching this means
            // the binary itself was built broken.
            Err(e) => panic!("built-in config/default.toml does not load: {e}"),
        }
    }
}

/// `path` with a leading `~/` replaced by the home folder.
pub fn expand_home(path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(path)
}
