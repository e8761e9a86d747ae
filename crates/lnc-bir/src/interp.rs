//! Reference interpreter (filled in by the interpreter work).
