//! The one public error type. Opaque: inspect it through `kind()` and the
//! accessors, so its insides can change without breaking users.

use crate::types::BackendError;
use std::fmt;

/// What went wrong, broadly.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Every backend allowed for the query failed or declined it.
    NoBackend,
    /// The chosen backend failed and fallback was disabled.
    BackendFailed,
    /// The query is malformed (for example an expression used outside the
    /// closure that created it).
    InvalidQuery,
    /// A configuration value (environment variable, setting) is invalid.
    Config,
    /// The query captures more values than its parameter slots hold
    /// ([`MAX_PARAMS`](crate::expr::MAX_PARAMS)).
    TooManyParameters,
}

/// A computeq error.
#[derive(Clone, Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    attempts: Vec<BackendError>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            attempts: Vec::new(),
        }
    }

    pub(crate) fn with_attempts(mut self, attempts: Vec<BackendError>) -> Error {
        self.attempts = attempts;
        self
    }

    /// The broad kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The failures of every backend that was tried, in order.
    pub fn attempts(&self) -> &[BackendError] {
        &self.attempts
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for a in &self.attempts {
            write!(f, "; {a}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// `Result` with computeq's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
