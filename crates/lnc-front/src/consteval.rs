//! Python's semantics on compile-time values.
//!
//! `tl.constexpr` arithmetic happens in Python when Triton compiles a kernel, so it follows
//! Python's rules, not Triton's: `7 // -2 == -4` (floor), `-7 % 2 == 1` (sign of the
//! divisor), `1 / 2 == 0.5`, ints are unbounded (here: 128 bits, overflow is an error).
//! Errors are returned as messages; the caller attaches the span.

use lnc_syntax::ast::{BinOp, CmpOp, UnaryOp};

use crate::value::Cv;

/// A number, with `bool` seen as the `int` it is in Python.
#[derive(Clone, Copy)]
enum Num {
    I(i128),
    F(f64),
}

fn num(c: &Cv) -> Option<Num> {
    match *c {
        Cv::Int(i) => Some(Num::I(i)),
        Cv::Bool(b) => Some(Num::I(b as i128)),
        Cv::Float(f) => Some(Num::F(f)),
        _ => None,
    }
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::I(i) => i as f64,
        Num::F(f) => f,
    }
}

/// Python's name for the type of a value, for messages.
pub(crate) fn py_type(c: &Cv) -> &'static str {
    match c {
        Cv::Int(_) => "int",
        Cv::Float(_) => "float",
        Cv::Bool(_) => "bool",
        Cv::None => "NoneType",
        Cv::Str(_) => "str",
        Cv::DType(_) => "dtype",
        Cv::Type(_) => "type",
    }
}

/// Python's truth value.
pub(crate) fn truthy(c: &Cv) -> bool {
    match c {
        Cv::Int(i) => *i != 0,
        Cv::Float(f) => *f != 0.0,
        Cv::Bool(b) => *b,
        Cv::None => false,
        Cv::Str(s) => !s.is_empty(),
        Cv::DType(_) | Cv::Type(_) => true,
    }
}

const OVERFLOW: &str = "integer overflow in a compile-time expression (lnc keeps 128 bits)";

/// `a op b` on compile-time values.
pub(crate) fn binop(op: BinOp, a: &Cv, b: &Cv) -> Result<Cv, String> {
    let unsupported =
        || format!("unsupported operand types for `{}`: {} and {}", op.as_str(), py_type(a), py_type(b));
    // Bitwise operators on two bools stay bools, as in Python.
    if let (Cv::Bool(x), Cv::Bool(y)) = (a, b) {
        match op {
            BinOp::BitAnd => return Ok(Cv::Bool(x & y)),
            BinOp::BitOr => return Ok(Cv::Bool(x | y)),
            BinOp::BitXor => return Ok(Cv::Bool(x ^ y)),
            _ => {}
        }
    }
    let (Some(x), Some(y)) = (num(a), num(b)) else {
        if let (Cv::Str(x), Cv::Str(y), BinOp::Add) = (a, b, op) {
            return Ok(Cv::Str(format!("{x}{y}").into()));
        }
        return Err(unsupported());
    };
    match (x, y) {
        (Num::I(x), Num::I(y)) => {
            int_binop(op, x, y).map_err(|e| if e.is_empty() { unsupported() } else { e })
        }
        _ => float_binop(op, as_f64(x), as_f64(y)).map_err(|e| if e.is_empty() { unsupported() } else { e }),
    }
}

fn int_binop(op: BinOp, x: i128, y: i128) -> Result<Cv, String> {
    let ovf = || OVERFLOW.to_string();
    let v = match op {
        BinOp::Add => x.checked_add(y).ok_or_else(ovf)?,
        BinOp::Sub => x.checked_sub(y).ok_or_else(ovf)?,
        BinOp::Mul => x.checked_mul(y).ok_or_else(ovf)?,
        BinOp::Div => {
            if y == 0 {
                return Err("division by zero".into());
            }
            return Ok(Cv::Float(x as f64 / y as f64));
        }
        BinOp::FloorDiv => {
            if y == 0 {
                return Err("integer division by zero".into());
            }
            let q = x.checked_div(y).ok_or_else(ovf)?;
            if x % y != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q }
        }
        BinOp::Mod => {
            if y == 0 {
                return Err("integer modulo by zero".into());
            }
            let r = x.checked_rem(y).ok_or_else(ovf)?;
            if r != 0 && ((r < 0) != (y < 0)) { r + y } else { r }
        }
        BinOp::Pow => {
            if y < 0 {
                return float_binop(op, x as f64, y as f64);
            }
            let e = u32::try_from(y).map_err(|_| ovf())?;
            x.checked_pow(e).ok_or_else(ovf)?
        }
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::Shl => {
            if y < 0 {
                return Err("negative shift count".into());
            }
            if y >= 127 {
                return Err(ovf());
            }
            let v = x << y;
            if v >> y != x {
                return Err(ovf());
            }
            v
        }
        BinOp::Shr => {
            if y < 0 {
                return Err("negative shift count".into());
            }
            x >> y.min(127)
        }
        BinOp::MatMul => return Err(String::new()),
    };
    Ok(Cv::Int(v))
}

fn float_binop(op: BinOp, x: f64, y: f64) -> Result<Cv, String> {
    let v = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => {
            if y == 0.0 {
                return Err("float division by zero".into());
            }
            x / y
        }
        BinOp::FloorDiv | BinOp::Mod => {
            if y == 0.0 {
                return Err("float modulo by zero".into());
            }
            let (div, rem) = py_float_divmod(x, y);
            if op == BinOp::Mod { rem } else { div }
        }
        BinOp::Pow => {
            if x == 0.0 && y < 0.0 {
                return Err("0.0 cannot be raised to a negative power".into());
            }
            if x < 0.0 && y.fract() != 0.0 {
                return Err("a negative number raised to a fractional power is complex".into());
            }
            x.powf(y)
        }
        _ => return Err(String::new()),
    };
    Ok(Cv::Float(v))
}

/// CPython's `float_divmod`: the remainder has the divisor's sign.
fn py_float_divmod(vx: f64, wx: f64) -> (f64, f64) {
    let mut m = vx % wx;
    let mut div = (vx - m) / wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = 0f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0f64.copysign(vx / wx)
    };
    (floordiv, m)
}

/// `op a` on compile-time values.
pub(crate) fn unop(op: UnaryOp, a: &Cv) -> Result<Cv, String> {
    if op == UnaryOp::Not {
        return Ok(Cv::Bool(!truthy(a)));
    }
    let sym = match op {
        UnaryOp::Neg => "-",
        UnaryOp::Pos => "+",
        UnaryOp::Invert => "~",
        UnaryOp::Not => "not",
    };
    let bad = || format!("bad operand type for unary `{sym}`: {}", py_type(a));
    match (op, num(a).ok_or_else(bad)?) {
        (UnaryOp::Neg, Num::I(i)) => Ok(Cv::Int(i.checked_neg().ok_or_else(|| OVERFLOW.to_string())?)),
        (UnaryOp::Neg, Num::F(f)) => Ok(Cv::Float(-f)),
        (UnaryOp::Pos, Num::I(i)) => Ok(Cv::Int(i)),
        (UnaryOp::Pos, Num::F(f)) => Ok(Cv::Float(f)),
        (UnaryOp::Invert, Num::I(i)) => Ok(Cv::Int(!i)),
        _ => Err(bad()),
    }
}

/// `a op b` for comparison operators other than `is`, `in` and their negations.
pub(crate) fn compare(op: CmpOp, a: &Cv, b: &Cv) -> Result<bool, String> {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        let ord = match (x, y) {
            (Num::I(x), Num::I(y)) => x.partial_cmp(&y),
            _ => as_f64(x).partial_cmp(&as_f64(y)),
        };
        return Ok(match op {
            CmpOp::Eq => ord == Some(std::cmp::Ordering::Equal),
            CmpOp::Ne => ord != Some(std::cmp::Ordering::Equal),
            CmpOp::Lt => ord == Some(std::cmp::Ordering::Less),
            CmpOp::Le => matches!(ord, Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)),
            CmpOp::Gt => ord == Some(std::cmp::Ordering::Greater),
            CmpOp::Ge => matches!(ord, Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)),
            _ => return Err(format!("`{}` is not supported here", op.as_str())),
        });
    }
    match op {
        CmpOp::Eq => Ok(a == b),
        CmpOp::Ne => Ok(a != b),
        _ => match (a, b) {
            (Cv::Str(x), Cv::Str(y)) => Ok(match op {
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                _ => x >= y,
            }),
            _ => Err(format!("`{}` is not supported between {} and {}", op.as_str(), py_type(a), py_type(b))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(v: i128) -> Cv {
        Cv::Int(v)
    }

    #[test]
    fn python_division_semantics() {
        assert_eq!(binop(BinOp::FloorDiv, &i(7), &i(-2)), Ok(i(-4)));
        assert_eq!(binop(BinOp::FloorDiv, &i(-7), &i(2)), Ok(i(-4)));
        assert_eq!(binop(BinOp::Mod, &i(-7), &i(2)), Ok(i(1)));
        assert_eq!(binop(BinOp::Mod, &i(7), &i(-2)), Ok(i(-1)));
        assert_eq!(binop(BinOp::Div, &i(1), &i(2)), Ok(Cv::Float(0.5)));
        assert_eq!(binop(BinOp::FloorDiv, &Cv::Float(-7.0), &Cv::Float(2.0)), Ok(Cv::Float(-4.0)));
        assert_eq!(binop(BinOp::Mod, &Cv::Float(-7.0), &Cv::Float(2.0)), Ok(Cv::Float(1.0)));
        assert!(binop(BinOp::Div, &i(1), &i(0)).is_err());
    }

    #[test]
    fn ints_bools_and_overflow() {
        assert_eq!(binop(BinOp::Add, &Cv::Bool(true), &Cv::Bool(true)), Ok(i(2)));
        assert_eq!(binop(BinOp::BitAnd, &Cv::Bool(true), &Cv::Bool(false)), Ok(Cv::Bool(false)));
        assert_eq!(binop(BinOp::Pow, &i(2), &i(10)), Ok(i(1024)));
        assert_eq!(binop(BinOp::Pow, &i(2), &i(-1)), Ok(Cv::Float(0.5)));
        assert!(binop(BinOp::Pow, &i(2), &i(200)).is_err());
        assert_eq!(binop(BinOp::Shl, &i(1), &i(10)), Ok(i(1024)));
        assert_eq!(unop(UnaryOp::Invert, &i(5)), Ok(i(-6)));
        assert_eq!(unop(UnaryOp::Not, &i(0)), Ok(Cv::Bool(true)));
        assert!(binop(BinOp::Add, &i(1), &Cv::None).is_err());
    }

    #[test]
    fn comparisons() {
        assert_eq!(compare(CmpOp::Lt, &i(1), &Cv::Float(1.5)), Ok(true));
        assert_eq!(compare(CmpOp::Eq, &Cv::Bool(true), &i(1)), Ok(true));
        assert_eq!(compare(CmpOp::Eq, &Cv::None, &Cv::None), Ok(true));
        assert_eq!(compare(CmpOp::Ne, &Cv::None, &i(0)), Ok(true));
        assert!(compare(CmpOp::Lt, &Cv::None, &i(0)).is_err());
    }
}
