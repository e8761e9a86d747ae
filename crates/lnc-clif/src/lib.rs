//! Cranelift code generation of lnc: loop IR to JIT-compiled machine code.
