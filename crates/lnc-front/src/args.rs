//! Binding call arguments to parameters, and reading compile-time arguments.

use lnc_bir::{DType, Elem, MAX_RANK, Shape};
use lnc_diag::{Diagnostic, Span};

use crate::diag::{cv_str, suggest};
use crate::lower::{Failed, Lowerer, R};
use crate::value::{Cv, Opnd, Val};

/// The arguments of a call, evaluated.
pub(crate) struct CallArgs {
    /// Positional arguments.
    pub(crate) pos: Vec<Opnd>,
    /// Keyword arguments: name, span of the name, value.
    pub(crate) kw: Vec<(String, Span, Opnd)>,
    /// The whole call expression.
    pub(crate) span: Span,
}

/// Largest number of elements of a block (Triton's `TRITON_MAX_TENSOR_NUMEL`).
pub(crate) const MAX_NUMEL: u64 = 1 << 20;

impl<'a, 'f> Lowerer<'a, 'f> {
    /// Binds arguments to the named parameters of `what`; the first `required` are
    /// mandatory. With `varargs`, extra positional arguments after the first `required`
    /// are returned separately (`device_print(prefix, *args)`).
    pub(crate) fn bind(
        &mut self,
        what: &str,
        params: &[&str],
        required: usize,
        args: CallArgs,
    ) -> R<Vec<Option<Opnd>>> {
        let (bound, extra) = self.bind_impl(what, params, required, args, false)?;
        debug_assert!(extra.is_empty());
        Ok(bound)
    }

    /// Like [`Lowerer::bind`], collecting extra positional arguments after `fixed` of them.
    pub(crate) fn bind_varargs(
        &mut self,
        what: &str,
        params: &[&str],
        fixed: usize,
        args: CallArgs,
    ) -> R<(Vec<Option<Opnd>>, Vec<Opnd>)> {
        self.bind_impl(what, params, fixed, args, true)
    }

    fn bind_impl(
        &mut self,
        what: &str,
        params: &[&str],
        required: usize,
        args: CallArgs,
        varargs: bool,
    ) -> R<(Vec<Option<Opnd>>, Vec<Opnd>)> {
        let mut bound: Vec<Option<Opnd>> = vec![None; params.len()];
        let mut extra = Vec::new();
        let positional_params = if varargs { required } else { params.len() };
        for (i, a) in args.pos.into_iter().enumerate() {
            if i < positional_params {
                bound[i] = Some(a);
            } else if varargs {
                extra.push(a);
            } else {
                let d = Diagnostic::error(
                    format!(
                        "`{what}` takes at most {} positional argument{}",
                        positional_params,
                        if positional_params == 1 { "" } else { "s" }
                    ),
                    a.span,
                    "unexpected argument",
                )
                .with_note(format!("`{what}({})`", params.join(", ")));
                return self.fail(d);
            }
        }
        for (name, nspan, a) in args.kw {
            let Some(i) = params.iter().position(|p| *p == name) else {
                let mut d = Diagnostic::error(
                    format!("`{what}` has no parameter named `{name}`"),
                    nspan,
                    "unknown keyword argument",
                );
                if let Some(s) = suggest(&name, params.iter().copied()) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                d = d.with_note(format!("`{what}({})`", params.join(", ")));
                return self.fail(d);
            };
            if bound[i].is_some() {
                let d = Diagnostic::error(format!("`{what}` got `{name}` twice"), nspan, "given again here");
                return self.fail(d);
            }
            bound[i] = Some(a);
        }
        if let Some(missing) = (0..required).find(|&i| bound[i].is_none()) {
            let d = Diagnostic::error(
                format!("`{what}` is missing its `{}` argument", params[missing]),
                args.span,
                format!("`{}` not given", params[missing]),
            )
            .with_note(format!("`{what}({})`", params.join(", ")));
            return self.fail(d);
        }
        Ok((bound, extra))
    }

    fn not_constexpr<T>(&mut self, o: &Opnd, what: &str, expected: &str) -> R<T> {
        if matches!(o.v, Val::Undef(_)) {
            return Err(Failed);
        }
        let desc = self.describe(&o.v);
        let d = if matches!(o.v, Val::Tensor(_)) {
            Diagnostic::error(
                format!("{what} must be a compile-time constant"),
                o.span,
                "known only at run time",
            )
            .with_help(
                "compile-time values are literals, `tl.constexpr` parameters and expressions on them; \
                     annotate the parameter `NAME: tl.constexpr` and give its value in the signature",
            )
        } else {
            Diagnostic::error(format!("{what} must be {expected}, got {desc}"), o.span, "")
        };
        self.fail(d)
    }

    /// A compile-time integer (`bool` counts, as in Python); a known scalar gives its value.
    pub(crate) fn const_int(&mut self, o: &Opnd, what: &str) -> R<i128> {
        match self.static_view(&o.v) {
            Val::Const(Cv::Int(i)) => Ok(i),
            Val::Const(Cv::Bool(b)) => Ok(b as i128),
            _ => self.not_constexpr(o, what, "an integer"),
        }
    }

    /// A compile-time boolean.
    pub(crate) fn const_bool(&mut self, o: &Opnd, what: &str) -> R<bool> {
        match self.static_view(&o.v) {
            Val::Const(Cv::Bool(b)) => Ok(b),
            Val::Const(Cv::Int(i)) => Ok(i != 0),
            _ => self.not_constexpr(o, what, "a bool"),
        }
    }

    /// A compile-time string.
    pub(crate) fn const_str(&mut self, o: &Opnd, what: &str) -> R<String> {
        match &o.v {
            Val::Const(Cv::Str(s)) => Ok(s.to_string()),
            _ => self.not_constexpr(o, what, "a string"),
        }
    }

    /// A numeric dtype (`tl.float32`).
    pub(crate) fn const_dtype(&mut self, o: &Opnd, what: &str) -> R<DType> {
        match o.v {
            Val::Const(Cv::DType(Elem::Scalar(d))) => Ok(d),
            Val::Const(Cv::DType(Elem::Ptr(_))) => {
                let d = Diagnostic::error(
                    format!("{what} must be a number dtype, not a pointer type"),
                    o.span,
                    "",
                );
                self.fail(d)
            }
            _ => self.not_constexpr(o, what, "a dtype such as `tl.float32`"),
        }
    }

    /// A block shape: an int or a tuple/list of ints, each a power of two, with at most
    /// [`MAX_NUMEL`] elements (Triton's `validate_block_shape`). `()` is a scalar.
    pub(crate) fn const_shape(&mut self, o: &Opnd, what: &str) -> R<Shape> {
        let v = self.static_view(&o.v);
        let items: Vec<Val> = match &v {
            Val::Tuple(items) => items.to_vec(),
            Val::Const(Cv::Int(_)) => vec![v.clone()],
            _ => return self.not_constexpr(o, what, "a tuple of integers"),
        };
        let mut dims = Vec::with_capacity(items.len());
        let mut numel: u64 = 1;
        for (i, item) in items.iter().enumerate() {
            let n = match item {
                Val::Const(Cv::Int(n)) => *n,
                Val::Tensor(_) => {
                    let el = Opnd::new(item.clone(), o.span);
                    return self.not_constexpr(&el, &format!("element {i} of {what}"), "an integer");
                }
                other => {
                    let desc = match other {
                        Val::Const(c) => cv_str(c),
                        _ => self.describe(other),
                    };
                    let d = Diagnostic::error(
                        format!("element {i} of {what} must be an integer, got {desc}"),
                        o.span,
                        "",
                    );
                    return self.fail(d);
                }
            };
            if n <= 0 || n > (1 << 20) || (n & (n - 1)) != 0 {
                let d = Diagnostic::error(
                    format!("element {i} of {what} must be a power of 2, got {n}"),
                    o.span,
                    "block dimensions are powers of two",
                )
                .with_help("round up with `triton.next_power_of_2` on the host and mask the extra elements");
                return self.fail(d);
            }
            numel = numel.saturating_mul(n as u64);
            dims.push(n as u32);
        }
        if numel > MAX_NUMEL {
            let d = Diagnostic::error(
                format!("a block of {numel} elements exceeds the maximum of {MAX_NUMEL}"),
                o.span,
                "",
            );
            return self.fail(d);
        }
        match Shape::new(&dims) {
            Some(s) => Ok(s),
            None => {
                let d = Diagnostic::error(
                    format!("blocks of rank {} are not supported (at most {MAX_RANK})", dims.len()),
                    o.span,
                    "",
                );
                self.fail(d)
            }
        }
    }

    /// An axis of a rank-`rank` block; negative axes count from the end.
    pub(crate) fn const_axis(&mut self, o: &Opnd, rank: usize, what: &str) -> R<usize> {
        let a = self.const_int(o, what)?;
        let r = rank as i128;
        if a < -r || a >= r {
            let d = Diagnostic::error(
                format!("axis {a} is out of range for a block of rank {rank}"),
                o.span,
                if rank == 1 {
                    "valid axes: 0 and -1".to_string()
                } else {
                    format!("valid axes: {}..={}", -r, r - 1)
                },
            )
            .with_help("axes count from 0 (the outermost) and negative axes from the end");
            return self.fail(d);
        }
        Ok(if a < 0 { (a + r) as usize } else { a as usize })
    }
}

/// `None` arguments and absent ones are the same to builtins.
pub(crate) fn given(o: &Option<Opnd>) -> Option<&Opnd> {
    o.as_ref().filter(|o| !o.v.is_none())
}
