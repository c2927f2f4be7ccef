//! Where queries start: `.compute()` on slices, vectors and device arrays,
//! and what `zip` accepts.

use super::{Query, SourceParts, SourceValues};
use crate::backend::Input;
use crate::expr::{Element, Expr};
use crate::runtime::Engine;

/// Anything a query can read: a slice, a `Vec`, an array, a device array.
pub trait IntoSource<'a> {
    /// Element type.
    type Elem: Element;
    /// The column as a backend input. For a source that is not
    /// [`PLAIN`](IntoSource::PLAIN) (an Arrow array) a query reads
    /// [`into_parts`](IntoSource::into_parts) instead: this gives its
    /// values buffer only, without its nulls, and an empty column where
    /// the values are converted.
    fn into_input(self) -> Input<'a>;

    /// Whether [`IntoSource::into_input`] is the whole source (no nulls, no
    /// conversion): a plain slice's query skips the parts.
    #[doc(hidden)]
    const PLAIN: bool = true;

    /// The column with its validity (Arrow data) or values the query must
    /// own (a conversion); plain sources are read in place, never null.
    #[doc(hidden)]
    fn into_parts(self) -> SourceParts<'a>
    where
        Self: Sized,
    {
        SourceParts {
            values: SourceValues::Borrowed(self.into_input()),
            validity: None,
        }
    }
}

impl<'a, T: Element> IntoSource<'a> for &'a [T] {
    type Elem = T;
    fn into_input(self) -> Input<'a> {
        Input::Host(T::column_ref(self))
    }
}

impl<'a, T: Element> IntoSource<'a> for &'a Vec<T> {
    type Elem = T;
    fn into_input(self) -> Input<'a> {
        Input::Host(T::column_ref(self))
    }
}

impl<'a, T: Element, const N: usize> IntoSource<'a> for &'a [T; N] {
    type Elem = T;
    fn into_input(self) -> Input<'a> {
        Input::Host(T::column_ref(self))
    }
}

/// Adds `.compute()` to `&[T]`, `Vec<T>` (by reference) and `&Vec<T>`.
///
/// # Examples
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
/// let xs = vec![3u32, 1, 2];
/// assert_eq!(xs.compute().max(), Some(3));
/// assert_eq!(xs[..2].compute().count(), 2);
/// ```
pub trait Compute<'a>: IntoSource<'a> + Sized {
    /// Starts a lazy query on the default engine.
    fn compute(self) -> Query<'a, Expr<Self::Elem>> {
        self.compute_on(crate::runtime::engine())
    }

    /// Starts a lazy query on `engine`.
    fn compute_on(self, engine: &'a Engine) -> Query<'a, Expr<Self::Elem>> {
        engine.query(self)
    }
}

impl<'a, S: IntoSource<'a>> Compute<'a> for S {}

impl crate::runtime::Engine {
    /// Starts a query over `source` on this engine.
    pub fn query<'a, S: IntoSource<'a>>(&'a self, source: S) -> Query<'a, Expr<S::Elem>> {
        if S::PLAIN {
            Query::new(self, source.into_input())
        } else {
            Query::from_parts(self, source.into_parts())
        }
    }
}
