//! Wording shared by the front end's diagnostics: how types and values are named to the
//! user, and "did you mean" suggestions.

use lnc_bir::{Elem, Shape, Type};

use crate::value::{Callee, Cv, Module, Val};

/// A dtype or pointer type as Triton spells it (`float32`, `pointer<float32>`).
pub(crate) fn elem_str(e: Elem) -> String {
    match e {
        Elem::Scalar(d) => d.tl_name().to_string(),
        Elem::Ptr(d) => format!("pointer<{}>", d.tl_name()),
    }
}

/// A shape as a Python list (`[32, 128]`).
pub(crate) fn shape_str(s: Shape) -> String {
    let dims: Vec<String> = s.dims().iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// A value type: `float32`, `pointer<float32>`, `float32[32, 128]`.
pub(crate) fn type_str(t: Type) -> String {
    if t.shape.is_scalar() { elem_str(t.elem) } else { format!("{}{}", elem_str(t.elem), shape_str(t.shape)) }
}

/// What a compile-time value is, for messages (`int 3`, `None`).
pub(crate) fn cv_str(c: &Cv) -> String {
    match c {
        Cv::Int(i) => format!("int {i}"),
        Cv::Float(f) => format!("float {f:?}"),
        Cv::Bool(b) => format!("bool {}", if *b { "True" } else { "False" }),
        Cv::None => "None".into(),
        Cv::Str(s) => format!("string {s:?}"),
        Cv::DType(e) => format!("dtype {}", elem_str(*e)),
        Cv::Type(t) => format!("type {}", type_str(*t)),
    }
}

/// Names a module as kernel code spells it.
pub(crate) fn module_str(m: Module) -> &'static str {
    match m {
        Module::Tl => "tl",
        Module::TlMath => "tl.math",
        Module::Triton => "triton",
    }
}

/// What a value is, for messages; runtime values are named by their type.
pub(crate) fn val_str(v: &Val, ty: impl Fn(lnc_bir::Value) -> Type) -> String {
    match v {
        Val::Const(c) => cv_str(c),
        Val::Tensor(x) => {
            let t = ty(*x);
            if t.is_block() {
                format!("a block of type {}", type_str(t))
            } else {
                format!("a {}", type_str(t))
            }
        }
        Val::Tuple(items) => format!("a tuple of {} elements", items.len()),
        Val::Module(m) => format!("the module `{}`", module_str(*m)),
        Val::Func(Callee::Builtin(b)) => format!("the function `{}`", b.name()),
        Val::Func(Callee::Jit(_)) => "a @jit function".into(),
        Val::Bound(..) => "a method".into(),
        Val::Undef(_) => "an undefined value".into(),
    }
}

/// "Did you mean" candidates, shared with the command line.
pub(crate) use lnc_diag::suggest;

#[cfg(test)]
mod tests {
    use super::*;
    use lnc_bir::DType;

    #[test]
    fn names() {
        assert_eq!(type_str(Type::block(Elem::Scalar(DType::F32), Shape::d2(32, 128))), "float32[32, 128]");
        assert_eq!(type_str(Type::ptr(DType::F16)), "pointer<float16>");
    }
}
