//! Why a backend declined a plan before running it.

use super::{DType, PlanError};
use std::borrow::Cow;
use std::fmt;

/// Why a backend declined a plan before running it (its `supports`):
/// typed, so that `explain` and the recommendations read the reason
/// instead of guessing it from the message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decline {
    /// The device has no values of `dtype`: `f64` without wgpu's
    /// `SHADER_F64`, 64-bit integers without `SHADER_INT64` (GL and WebGPU
    /// have neither). `feature` names what is missing.
    MissingType {
        /// The element type the plan uses.
        dtype: DType,
        /// The device feature that would provide it.
        feature: &'static str,
    },
    /// The backend's language lacks an operation on `dtype` (WGSL has no
    /// `f64` `exp`, `ln`, `sin` or `cos`).
    MissingOperation {
        /// The operation.
        op: &'static str,
        /// The element type it is applied to.
        dtype: DType,
    },
    /// The plan exceeds a limit of the device (workgroup memory, storage
    /// buffers per kernel), in words.
    Limit(String),
    /// The backend's compiler found the plan invalid (a bug: see
    /// [`PlanError`]).
    InvalidPlan(PlanError),
    /// The backend cannot express the plan, or could not look at it (its
    /// device failed to open), in words.
    Other(Cow<'static, str>),
}

impl Decline {
    /// Whether the plan's 64-bit values are what the device lacks: a
    /// 64-bit type, or an operation on one. Using 32-bit data would let
    /// the device run it.
    pub fn is_64_bit(&self) -> bool {
        match self {
            Decline::MissingType { dtype, .. } | Decline::MissingOperation { dtype, .. } => {
                dtype.size() == 8
            }
            Decline::Limit(_) | Decline::InvalidPlan(_) | Decline::Other(_) => false,
        }
    }
}

impl fmt::Display for Decline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decline::MissingType { dtype, feature } => {
                write!(f, "{dtype} needs {feature}, which this device lacks")
            }
            Decline::MissingOperation { op, dtype } => {
                write!(f, "the device's language has no {dtype} `{op}`")
            }
            Decline::Limit(why) => f.write_str(why),
            Decline::InvalidPlan(e) => write!(f, "the plan is invalid: {e}"),
            Decline::Other(why) => f.write_str(why),
        }
    }
}

impl From<PlanError> for Decline {
    fn from(e: PlanError) -> Decline {
        Decline::InvalidPlan(e)
    }
}

impl From<Cow<'static, str>> for Decline {
    fn from(why: Cow<'static, str>) -> Decline {
        Decline::Other(why)
    }
}

impl From<&'static str> for Decline {
    fn from(why: &'static str) -> Decline {
        Decline::Other(Cow::Borrowed(why))
    }
}

impl From<String> for Decline {
    fn from(why: String) -> Decline {
        Decline::Other(Cow::Owned(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_64_bit_types_and_their_operations_are_64_bit() {
        let f64 = Decline::MissingType {
            dtype: DType::F64,
            feature: "SHADER_F64",
        };
        assert!(f64.is_64_bit());
        assert_eq!(
            f64.to_string(),
            "f64 needs SHADER_F64, which this device lacks"
        );
        let exp = Decline::MissingOperation {
            op: "exp",
            dtype: DType::F64,
        };
        assert!(exp.is_64_bit());
        assert!(!Decline::MissingOperation {
            op: "exp",
            dtype: DType::F32
        }
        .is_64_bit());
        assert!(!Decline::Limit("too many buffers".into()).is_64_bit());
        assert!(!Decline::from("f64 is mentioned in words only").is_64_bit());
    }
}
