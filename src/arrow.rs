//! Arrow arrays in and out (feature `arrow`, arrow-rs 59: DataFusion 55's).
//!
//! `.compute()` works on Arrow primitive arrays as on slices, reading the
//! values buffer in place (a sliced array reads its slice); a query over
//! several columns of one `RecordBatch` zips them ([`column()`]).
//! `collect_arrow` moves the output `Vec` into an Arrow buffer, no copy.
//!
//! | Arrow type | element | read |
//! | --- | --- | --- |
//! | `Int32`, `Date32`, `Time32(*)`, `Interval(YearMonth)` | `i32` | in place |
//! | `Int64`, `Date64`, `Time64(*)`, `Timestamp(*)`, `Duration(*)` | `i64` | in place |
//! | `UInt32`, `UInt64`, `Float32`, `Float64` | `u32`, `u64`, `f32`, `f64` | in place |
//! | `Int8`, `Int16` / `UInt8`, `UInt16` / `Float16` | `i32` / `u32` / `f32` | widened (one copy) |
//! | `Boolean` | `bool` | unpacked from bits (one copy) |
//!
//! **Nulls** follow SQL, identically on every backend (the validity bitmap
//! is unpacked into a `bool` column read beside the values; the backends
//! run the same plan as without nulls): an element-wise result is null
//! where an input it reads is null; a filter drops rows whose predicate is
//! null or false; aggregates skip nulls (`count` counts the non-null
//! elements, [`Query::count_rows`](crate::Query::count_rows) every row,
//! `min`/`max`/`mean` of only nulls are `None`); sorts put nulls last, in
//! both directions ([`Query::nulls_first`](crate::Query::nulls_first)
//! puts them first); a null group key is a group of its own
//! ([`Groups::null_group`](crate::query::Groups::null_group), or the key
//! `None` after [`GroupBy::option_keys`](crate::query::GroupBy::option_keys),
//! which tuple keys with nulls need), `count_distinct` does not count the
//! nulls (SQL's `COUNT(DISTINCT x)`), `distinct_options` returns the null
//! as `None`, a scan adds nothing for a null (as SQL's running `SUM`),
//! `argmin`/`argmax` skip nulls, and a null join key matches nothing.
//! [`Query::collect_arrow`] and
//! [`Query::collect_options`] return the nulls; a plain `collect` (or
//! `distinct`) of a column with nulls is an error (its values there are
//! unspecified), as is what does not take nulls yet (see `docs/arrow.md`):
//! [`Query::drop_nulls`](crate::Query::drop_nulls) or
//! [`Query::fill_null`](crate::Query::fill_null) first. An array whose
//! validity has no null reads as one without.
//!
//! ```
//! # let _ = computeq::set_engine(computeq::Engine::default());
//! use arrow_array::{Float32Array, Array};
//! use computeq::prelude::*;
//!
//! let xs = Float32Array::from(vec![Some(1.0), None, Some(3.0), Some(-4.0)]);
//! let s: f32 = xs.compute().map(|x| x * 2.0).filter(|x| x.gt(0.0)).sum();
//! assert_eq!(s, 8.0);
//! assert_eq!(xs.compute().count(), 3);
//! assert_eq!(xs.compute().count_rows(), 4);
//!
//! let ys = xs.compute().map(|x| x + 1.0).collect_arrow();
//! assert_eq!(ys, Float32Array::from(vec![Some(2.0), None, Some(4.0), Some(-3.0)]));
//! ```

use crate::backend::Input;
use crate::error::{Error, ErrorKind};
use crate::expr::{Element, Expr};
use crate::query::{IntoSource, Mode, Query, SourceParts, SourceValues};
use crate::types::{Column, ColumnRef};
use arrow_array::types::*;
use arrow_array::{Array, ArrowPrimitiveType, BooleanArray, PrimitiveArray, RecordBatch};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use std::marker::PhantomData;

/// Eight `bool` bytes per byte of a bitmap (bit `j` to byte `j`).
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 8 {
            if b >> j & 1 != 0 {
                t[b] |= 1 << (8 * j);
            }
            j += 1;
        }
        b += 1;
    }
    t
};

/// A bitmap as one `bool` per row: eight rows per table lookup, 64 per
/// word of the bitmap, each eight stored at once into the column (one
/// pass over it: no zeroing first, no conversion after).
fn unpack(bits: &BooleanBuffer) -> Vec<bool> {
    let n = bits.len();
    let whole = n.next_multiple_of(64);
    let mut rows: Vec<bool> = Vec::with_capacity(whole);
    let chunks = bits.bit_chunks();
    let words = chunks
        .iter()
        .chain(std::iter::once(chunks.remainder_bits()));
    // `n / 64` whole words and a remainder word: `whole / 64` of them (the
    // remainder of a bitmap of whole words is one word more, never read).
    for (out, word) in rows.spare_capacity_mut()[..whole]
        .chunks_exact_mut(64)
        .zip(words)
    {
        for (k, eight) in out.chunks_exact_mut(8).enumerate() {
            let spread = SPREAD[(word >> (8 * k)) as usize & 0xff].to_le_bytes();
            // SAFETY: `eight` is 8 bytes of the vector's spare capacity
            // (`bool` is one byte, alignment one), and each byte stored is
            // 0 or 1, a valid `bool`.
            unsafe { eight.as_mut_ptr().cast::<[u8; 8]>().write(spread) };
        }
    }
    // SAFETY: every one of the first `whole >= n` elements was written
    // above (`whole / 64` chunks, as many words).
    unsafe { rows.set_len(n) };
    rows
}

/// One bit per `bool`, eight at a time (the byte `j` of a word to bit `j`).
fn pack(valid: &[bool]) -> BooleanBuffer {
    let mut bytes: Vec<u8> = Vec::with_capacity(valid.len().div_ceil(8));
    let mut rows = valid.chunks_exact(8);
    for eight in &mut rows {
        let word = u64::from_le_bytes(std::array::from_fn(|j| eight[j] as u8));
        bytes
            .push(((word & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8);
    }
    let rest = rows.remainder();
    if !rest.is_empty() {
        bytes.push(
            rest.iter()
                .enumerate()
                .fold(0u8, |b, (j, &v)| b | (u8::from(v) << j)),
        );
    }
    BooleanBuffer::new(bytes.into(), 0, valid.len())
}

fn validity(nulls: Option<&NullBuffer>) -> Option<Vec<bool>> {
    nulls
        .filter(|n| n.null_count() > 0)
        .map(|n| unpack(n.inner()))
}

/// The null buffer of collected validities (`None` when every row is
/// valid).
fn null_buffer(valid: Vec<bool>) -> Option<NullBuffer> {
    let nulls = NullBuffer::new(pack(&valid));
    (nulls.null_count() > 0).then_some(nulls)
}

/// An element type that has an Arrow array: the six numbers (primitive
/// arrays) and `bool` (`BooleanArray`).
pub trait ArrowElement: Element {
    /// The Arrow array of this element type.
    type Array: Array + std::fmt::Debug + PartialEq;
    /// Moves `values` into an array (no copy for numbers).
    fn to_array(values: Vec<Self>, nulls: Option<NullBuffer>) -> Self::Array;
    /// Reads `array` as a column of this element type, when its Arrow type
    /// is one this type reads (see the module's table).
    fn parts_of(array: &dyn Array) -> Option<SourceParts<'_>>;
}

fn in_place<A: ArrowPrimitiveType>(array: &PrimitiveArray<A>) -> SourceParts<'_>
where
    A::Native: Element,
{
    SourceParts {
        values: SourceValues::Borrowed(Input::Host(A::Native::column_ref(array.values()))),
        validity: validity(array.nulls()),
    }
}

fn widened<A: ArrowPrimitiveType>(
    array: &PrimitiveArray<A>,
    widen: impl Fn(&[A::Native]) -> Column,
) -> SourceParts<'_> {
    SourceParts {
        values: SourceValues::Owned(widen(array.values())),
        validity: validity(array.nulls()),
    }
}

/// `Some(parts)` when `array` is a `PrimitiveArray<A>` of one of `$A`
/// (read in place).
macro_rules! try_in_place {
    ($array:expr, $($A:ty),*) => {
        $(if let Some(a) = $array.as_any().downcast_ref::<PrimitiveArray<$A>>() {
            return Some(in_place(a));
        })*
    };
}

/// Primitive arrays read in place.
macro_rules! primitive_source {
    ($($A:ty),*) => {$(
        impl<'a> IntoSource<'a> for &'a PrimitiveArray<$A> {
            type Elem = <$A as ArrowPrimitiveType>::Native;
            const PLAIN: bool = false;
            fn into_input(self) -> Input<'a> {
                Input::Host(Self::Elem::column_ref(self.values()))
            }
            fn into_parts(self) -> SourceParts<'a> {
                in_place(self)
            }
        }
    )*};
}

/// Narrow primitive arrays, widened into a column the query owns.
macro_rules! widened_source {
    ($($A:ty => $t:ty),*) => {$(
        impl<'a> IntoSource<'a> for &'a PrimitiveArray<$A> {
            type Elem = $t;
            const PLAIN: bool = false;
            fn into_input(self) -> Input<'a> {
                Input::Host(<$t>::column_ref(&[]))
            }
            fn into_parts(self) -> SourceParts<'a> {
                <$t as ArrowElement>::parts_of(self).expect("a widened type")
            }
        }
    )*};
}

macro_rules! arrow_element {
    ($t:ty, $A:ty, [$($also:ty),*], $column:ident, [$($narrow:ty => $w:expr),*]) => {
        impl ArrowElement for $t {
            type Array = PrimitiveArray<$A>;
            fn to_array(values: Vec<$t>, nulls: Option<NullBuffer>) -> Self::Array {
                PrimitiveArray::new(ScalarBuffer::from(values), nulls)
            }
            fn parts_of(array: &dyn Array) -> Option<SourceParts<'_>> {
                try_in_place!(array, $A $(, $also)*);
                $(if let Some(a) = array.as_any().downcast_ref::<PrimitiveArray<$narrow>>() {
                    return Some(widened(a, |xs| Column::$column(xs.iter().map($w).collect())));
                })*
                None
            }
        }
        primitive_source!($A $(, $also)*);
        widened_source!($($narrow => $t),*);
    };
}

arrow_element!(i32, Int32Type,
    [Date32Type, Time32SecondType, Time32MillisecondType, IntervalYearMonthType],
    I32, [Int8Type => |&x: &i8| x as i32, Int16Type => |&x: &i16| x as i32]);
arrow_element!(
    i64,
    Int64Type,
    [
        Date64Type,
        Time64MicrosecondType,
        Time64NanosecondType,
        TimestampSecondType,
        TimestampMillisecondType,
        TimestampMicrosecondType,
        TimestampNanosecondType,
        DurationSecondType,
        DurationMillisecondType,
        DurationMicrosecondType,
        DurationNanosecondType
    ],
    I64,
    []
);
arrow_element!(u32, UInt32Type, [], U32,
    [UInt8Type => |&x: &u8| x as u32, UInt16Type => |&x: &u16| x as u32]);
arrow_element!(u64, UInt64Type, [], U64, []);
arrow_element!(f32, Float32Type, [], F32, [Float16Type => |x: &half::f16| x.to_f32()]);
arrow_element!(f64, Float64Type, [], F64, []);

impl ArrowElement for bool {
    type Array = BooleanArray;
    fn to_array(values: Vec<bool>, nulls: Option<NullBuffer>) -> BooleanArray {
        BooleanArray::new(pack(&values), nulls)
    }
    fn parts_of(array: &dyn Array) -> Option<SourceParts<'_>> {
        let a = array.as_any().downcast_ref::<BooleanArray>()?;
        Some(SourceParts {
            values: SourceValues::Owned(Column::Bool(unpack(a.values()))),
            validity: validity(a.nulls()),
        })
    }
}

/// One Arrow column read as elements of `T`: from a `&dyn Array` or an
/// `ArrayRef` whose type was checked ([`ArrowColumn::new`]) or a named
/// column of a `RecordBatch` ([`column()`]). Starts a query with
/// `.compute()` or joins one with `zip`.
#[derive(Debug)]
pub struct ArrowColumn<'a, T> {
    parts: SourceParts<'a>,
    _type: PhantomData<T>,
}

impl<'a, T: ArrowElement> ArrowColumn<'a, T> {
    /// Reads `array` as elements of `T`, or fails with
    /// `ErrorKind::InvalidQuery` naming its Arrow type when `T` does not
    /// read it (the module's table says which do).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use std::sync::Arc;
    /// use arrow_array::{ArrayRef, Int16Array};
    /// use computeq::arrow::ArrowColumn;
    /// use computeq::prelude::*;
    /// let a: ArrayRef = Arc::new(Int16Array::from(vec![1, 2, 3]));
    /// let s: i32 = ArrowColumn::<i32>::new(&a).unwrap().compute().sum();
    /// assert_eq!(s, 6);
    /// assert!(ArrowColumn::<f64>::new(&a).is_err());
    /// ```
    pub fn new(array: &'a dyn Array) -> Result<Self, Error> {
        T::parts_of(array)
            .map(|parts| ArrowColumn {
                parts,
                _type: PhantomData,
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidQuery,
                    format!(
                        "an Arrow {} array cannot be read as {}",
                        array.data_type(),
                        T::DTYPE
                    ),
                )
            })
    }
}

/// The column `name` of `batch` read as elements of `T`.
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use computeq::arrow::column;
/// use computeq::prelude::*;
/// let batch = RecordBatch::try_from_iter([
///     ("price", Arc::new(Float64Array::from(vec![2.0, 3.0, 4.0])) as _),
///     ("qty", Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as _),
/// ])
/// .unwrap();
/// let total: f64 = column::<f64>(&batch, "price").unwrap()
///     .compute()
///     .zip(column::<i64>(&batch, "qty").unwrap())
///     .map(|(p, q)| p * q.cast::<f64>())
///     .sum();
/// assert_eq!(total, 14.0);
/// ```
pub fn column<'a, T: ArrowElement>(
    batch: &'a RecordBatch,
    name: &str,
) -> Result<ArrowColumn<'a, T>, Error> {
    let array = batch.column_by_name(name).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidQuery,
            format!("the record batch has no column {name:?}"),
        )
    })?;
    ArrowColumn::new(array.as_ref())
}

impl<'a, T: ArrowElement> IntoSource<'a> for ArrowColumn<'a, T> {
    type Elem = T;
    const PLAIN: bool = false;
    /// The values only; a query reads [`IntoSource::into_parts`], with the
    /// nulls.
    fn into_input(self) -> Input<'a> {
        match self.parts.values {
            SourceValues::Borrowed(input) => input,
            SourceValues::Owned(_) => Input::Host(T::column_ref(&[])),
        }
    }
    fn into_parts(self) -> SourceParts<'a> {
        self.parts
    }
}

impl<'a> IntoSource<'a> for &'a BooleanArray {
    type Elem = bool;
    const PLAIN: bool = false;
    fn into_input(self) -> Input<'a> {
        Input::Host(ColumnRef::Bool(&[]))
    }
    fn into_parts(self) -> SourceParts<'a> {
        bool::parts_of(self).expect("a boolean array")
    }
}

impl<'a, T: ArrowElement, M: Mode> Query<'a, Expr<T>, M> {
    /// Materializes the elements as an Arrow array, nulls included (the
    /// output `Vec` becomes the array's buffer, no copy; `bool` packs
    /// into bits).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use arrow_array::Int64Array;
    /// use computeq::prelude::*;
    /// let a = Int64Array::from(vec![Some(3), None, Some(1)]);
    /// let sorted = a.compute().sort().collect_arrow();
    /// assert_eq!(sorted, Int64Array::from(vec![Some(1), Some(3), None]));
    /// ```
    pub fn collect_arrow(self) -> M::Out<T::Array> {
        self.collect_with_validity(|values, valid| T::to_array(values, valid.and_then(null_buffer)))
    }

    /// Materializes the elements as `Option`s: `None` where null.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use arrow_array::UInt32Array;
    /// use computeq::prelude::*;
    /// let a = UInt32Array::from(vec![Some(3), None]);
    /// assert_eq!(a.compute().map(|x| x * 2).collect_options(), [Some(6), None]);
    /// ```
    pub fn collect_options(self) -> M::Out<Vec<Option<T>>> {
        self.collect_with_validity(crate::types::with_nulls)
    }
}

/// Reads `array` as a column of `dtype` (the run-time form of
/// [`ArrowElement::parts_of`]), when its Arrow type is one `dtype` reads.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
pub(crate) fn parts_of_dtype(
    array: &dyn Array,
    dtype: crate::expr::DType,
) -> Option<SourceParts<'_>> {
    use crate::expr::DType;
    match dtype {
        DType::Bool => bool::parts_of(array),
        DType::I32 => i32::parts_of(array),
        DType::U32 => u32::parts_of(array),
        DType::I64 => i64::parts_of(array),
        DType::U64 => u64::parts_of(array),
        DType::F32 => f32::parts_of(array),
        DType::F64 => f64::parts_of(array),
    }
}

/// A column and its validity as an Arrow array (numbers move into the
/// array's buffer, no copy).
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
pub(crate) fn column_to_array(column: Column, valid: Option<Vec<bool>>) -> arrow_array::ArrayRef {
    use std::sync::Arc;
    let nulls = valid.and_then(null_buffer);
    match column {
        Column::Bool(v) => Arc::new(bool::to_array(v, nulls)),
        Column::I32(v) => Arc::new(i32::to_array(v, nulls)),
        Column::U32(v) => Arc::new(u32::to_array(v, nulls)),
        Column::I64(v) => Arc::new(i64::to_array(v, nulls)),
        Column::U64(v) => Arc::new(u64::to_array(v, nulls)),
        Column::F32(v) => Arc::new(f32::to_array(v, nulls)),
        Column::F64(v) => Arc::new(f64::to_array(v, nulls)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_unpack_and_pack_at_every_offset_and_length() {
        let bools: Vec<bool> = (0..300u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 29 & 1 == 1)
            .collect();
        let packed = BooleanBuffer::from(bools.as_slice());
        for offset in [0, 1, 7, 8, 63, 64, 65] {
            for len in [0, 1, 7, 8, 9, 63, 64, 65, 128, 200] {
                let slice = packed.slice(offset, len);
                let rows = unpack(&slice);
                assert_eq!(
                    rows,
                    &bools[offset..offset + len],
                    "offset {offset} len {len}"
                );
                let again = pack(&rows);
                assert_eq!(
                    again.iter().collect::<Vec<_>>(),
                    rows,
                    "offset {offset} len {len}"
                );
            }
        }
    }
}
