//! lnc: JIT-compile Triton kernels to native CPU code with Cranelift (embedding API).
