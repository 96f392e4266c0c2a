//! The exceptions `toolslot` raises: one base class, one subclass per thing a caller can do
//! something about.

use pyo3::create_exception;
use pyo3::prelude::*;
use toolslot_actors::front::embed::EmbedError;

create_exception!(
    toolslot,
    ToolslotError,
    pyo3::exceptions::PyException,
    "Base class of every error toolslot raises."
);
create_exception!(
    toolslot,
    ConfigError,
    ToolslotError,
    "The configuration, a policy, a tool definition or an option is unusable."
);
create_exception!(
    toolslot,
    SessionError,
    ToolslotError,
    "The dispatcher refused: an unknown or closed session, a round already running, no approval waiting."
);
create_exception!(
    toolslot,
    StoppedError,
    ToolslotError,
    "The slot's runtime has stopped (closed, or it failed)."
);
create_exception!(
    toolslot,
    ForkError,
    ToolslotError,
    "A slot was used in a process forked after it started: its runtime thread lives only in the parent."
);
create_exception!(toolslot, InternalError, ToolslotError, "A bug in toolslot (a panic), contained.");

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ToolslotError", py.get_type::<ToolslotError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("SessionError", py.get_type::<SessionError>())?;
    m.add("StoppedError", py.get_type::<StoppedError>())?;
    m.add("ForkError", py.get_type::<ForkError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

/// The Python exception for an embedding error.
pub(crate) fn to_py(e: EmbedError) -> PyErr {
    match &e {
        EmbedError::Config(_) => ConfigError::new_err(e.to_string()),
        EmbedError::Dispatch(_) => SessionError::new_err(e.to_string()),
        EmbedError::Stopped(_) => StoppedError::new_err(e.to_string()),
    }
}

/// Refuses use in a process other than the one that started the runtime: after `fork()` the
/// child has the slot's memory but not its threads, so every call would wait forever.
pub(crate) fn same_process(started_in: u32) -> PyResult<()> {
    let now = std::process::id();
    if now == started_in {
        Ok(())
    } else {
        Err(ForkError::new_err(format!(
            "this toolslot.Slot was started in process {started_in} and cannot be used in process {now}, a fork of it: \
             create a new Slot in the child (its runtime threads did not survive the fork)"
        )))
    }
}
