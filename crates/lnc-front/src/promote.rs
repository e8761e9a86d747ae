//! Triton's type promotion rules, on dtypes alone (no IR).
//!
//! These follow `python/triton/language/semantic.py` (`integer_promote_impl`,
//! `computation_type_impl`, `to_tensor_type`) so that lnc computes in the same types as
//! Triton does: the result of an operation must not depend on which compiler ran it.

use lnc_bir::DType;

use crate::value::Cv;

/// Triton's kinds, ordered: a weakly typed literal of a kind no higher than the block's
/// does not take part in promotion.
fn kind(d: DType) -> u8 {
    if d.is_bool() {
        0
    } else if d.is_int() {
        1
    } else {
        2
    }
}

/// Signedness as Triton sees it: `int1` is unsigned.
fn signed(d: DType) -> bool {
    d.is_signed()
}

/// C's usual arithmetic conversions on two integer dtypes.
pub(crate) fn integer_promote(a: DType, b: DType) -> DType {
    let (ra, rb) = (a.bits(), b.bits());
    match (signed(a), signed(b)) {
        (x, y) if x == y => {
            if ra > rb {
                a
            } else {
                b
            }
        }
        // An unsigned operand wins when it is at least as wide.
        (false, true) => {
            if ra >= rb {
                a
            } else {
                b
            }
        }
        _ => {
            if rb >= ra {
                b
            } else {
                a
            }
        }
    }
}

/// The dtype both operands of an arithmetic operation are converted to. `a_weak` /
/// `b_weak` mark Python literals (and constexprs), which follow PyTorch-like scalar rules.
/// `div_or_mod` is set for `/`, `//` and `%`, which Triton never computes in 16-bit floats.
pub(crate) fn computation_type(
    a: DType,
    a_weak: bool,
    b: DType,
    b_weak: bool,
    div_or_mod: bool,
) -> Result<DType, String> {
    if a_weak != b_weak {
        let (scalar, tensor) = if a_weak { (a, b) } else { (b, a) };
        if kind(scalar) <= kind(tensor) {
            if div_or_mod && matches!(tensor, DType::F16 | DType::BF16) {
                return Ok(DType::F32);
            }
            return Ok(tensor);
        }
    }
    if a == DType::F64 || b == DType::F64 {
        return Ok(DType::F64);
    }
    if a == DType::F32 || b == DType::F32 {
        return Ok(DType::F32);
    }
    if a == DType::F16 || b == DType::F16 {
        return Ok(if div_or_mod { DType::F32 } else { DType::F16 });
    }
    if a == DType::BF16 && b == DType::BF16 {
        return Ok(if div_or_mod { DType::F32 } else { DType::BF16 });
    }
    if a == DType::BF16 || b == DType::BF16 {
        return Ok(DType::F32);
    }
    if div_or_mod && signed(a) != signed(b) {
        return Err(format!(
            "`/`, `//` and `%` need operands of the same signedness, got {} and {}",
            a.tl_name(),
            b.tl_name()
        ));
    }
    Ok(integer_promote(a, b))
}

/// The dtype a Python literal gets on its own (Triton's `to_tensor_type`), or `None` for
/// values that are not numbers or do not fit in 64 bits.
pub(crate) fn literal_dtype(c: &Cv) -> Option<DType> {
    match *c {
        Cv::Bool(_) => Some(DType::I1),
        Cv::Int(i) => {
            if (-(1i128 << 31)..(1i128 << 31)).contains(&i) {
                Some(DType::I32)
            } else if ((1i128 << 31)..(1i128 << 32)).contains(&i) {
                Some(DType::U32)
            } else if (-(1i128 << 63)..(1i128 << 63)).contains(&i) {
                Some(DType::I64)
            } else if ((1i128 << 63)..(1i128 << 64)).contains(&i) {
                Some(DType::U64)
            } else {
                None
            }
        }
        Cv::Float(x) => {
            let a = x.abs();
            let min32 = 2f64.powi(-126);
            let max32 = (2.0 - 2f64.powi(-23)) * 2f64.powi(127);
            if a.is_infinite() || a == 0.0 || x.is_nan() || (min32..=max32).contains(&a) {
                Some(DType::F32)
            } else {
                Some(DType::F64)
            }
        }
        _ => None,
    }
}

/// The range of an integer dtype.
pub(crate) fn int_range(d: DType) -> (i128, i128) {
    let bits = d.bits();
    if signed(d) { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn literals_are_weak() {
        // fp16 block * 2.0 stays fp16; int32 block + 1 stays int32; int64 block + 1 stays int64.
        assert_eq!(computation_type(F16, false, F32, true, false), Ok(F16));
        assert_eq!(computation_type(I32, false, I32, true, false), Ok(I32));
        assert_eq!(computation_type(I64, false, I32, true, false), Ok(I64));
        assert_eq!(computation_type(I8, false, I32, true, false), Ok(I8));
        // A float literal is of a higher kind than an int block: it promotes.
        assert_eq!(computation_type(I32, false, F32, true, false), Ok(F32));
        // Division of fp16 computes in fp32.
        assert_eq!(computation_type(F16, false, F32, true, true), Ok(F32));
    }

    #[test]
    fn strong_types_promote() {
        assert_eq!(computation_type(F32, false, F64, false, false), Ok(F64));
        assert_eq!(computation_type(I32, false, F16, false, false), Ok(F16));
        assert_eq!(computation_type(BF16, false, F16, false, false), Ok(F16));
        assert_eq!(computation_type(BF16, false, I32, false, false), Ok(F32));
        assert_eq!(computation_type(BF16, false, BF16, false, false), Ok(BF16));
        assert_eq!(computation_type(I32, false, I64, false, false), Ok(I64));
        assert_eq!(computation_type(I32, false, U32, false, false), Ok(U32));
        assert_eq!(computation_type(I64, false, U32, false, false), Ok(I64));
        assert_eq!(computation_type(I1, false, I32, false, false), Ok(I32));
        assert!(computation_type(I32, false, U32, false, true).is_err());
    }

    #[test]
    fn literal_types() {
        assert_eq!(literal_dtype(&Cv::Int(1)), Some(I32));
        assert_eq!(literal_dtype(&Cv::Int(1 << 31)), Some(U32));
        assert_eq!(literal_dtype(&Cv::Int(1 << 40)), Some(I64));
        assert_eq!(literal_dtype(&Cv::Int(-(1 << 40))), Some(I64));
        assert_eq!(literal_dtype(&Cv::Int(1 << 63)), Some(U64));
        assert_eq!(literal_dtype(&Cv::Int(1 << 64)), None);
        assert_eq!(literal_dtype(&Cv::Float(1e-5)), Some(F32));
        assert_eq!(literal_dtype(&Cv::Float(1e300)), Some(F64));
        assert_eq!(literal_dtype(&Cv::Bool(true)), Some(I1));
        assert_eq!(int_range(I8), (-128, 127));
        assert_eq!(int_range(U8), (0, 255));
        assert_eq!(int_range(I1), (0, 1));
    }
}
