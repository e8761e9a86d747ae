//! Front end of lnc: AST + signature to block IR.
