//! Block IR optimization passes of lnc, one per file.
