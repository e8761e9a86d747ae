//! Tiling passes of lnc: block IR to loop IR.
