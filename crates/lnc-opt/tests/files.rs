//! File tests: each `cases/<pass>/*.bir` starts with `; pass: <name>` (a pass of
//! `lnc_opt::PASSES`, or `optimize` for the whole pipeline) and gets one snapshot of the
//! printed result. Input and output must verify; after `optimize`, no pass changes anything.

use std::path::Path;

use lnc_bir::Function;
use lnc_bir::parse::parse_function;
use lnc_bir::print::print_function;
use lnc_bir::verify::verify;

fn must_verify(path: &Path, when: &str, func: &Function) {
    if let Err(e) = verify(func) {
        panic!("{}: invalid {when}:\n{e}", path.display());
    }
}

#[test]
fn cases() {
    insta::glob!("cases/*/*.bir", |path| {
        let text = std::fs::read_to_string(path).expect("readable case");
        let header = text.lines().next().unwrap_or_default();
        let Some(pass) = header.strip_prefix("; pass: ").map(str::trim) else {
            panic!("{}: the first line must be `; pass: <name>`", path.display());
        };
        let folder = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
        assert_eq!(folder, Some(pass), "{}: the folder names the pass", path.display());
        let mut func = parse_function(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        must_verify(path, "input", &func);
        let changed = if pass == "optimize" {
            let before = print_function(&func);
            lnc_opt::optimize(&mut func, &mut |name, f| must_verify(path, &format!("after {name}"), f));
            for name in lnc_opt::PASSES {
                let again = lnc_opt::run_pass(name, &mut func);
                assert_eq!(again, Some(false), "{}: {name} after the pipeline", path.display());
            }
            print_function(&func) != before
        } else {
            let changed =
                lnc_opt::run_pass(pass, &mut func).unwrap_or_else(|| panic!("unknown pass `{pass}`"));
            must_verify(path, &format!("after {pass}"), &func);
            changed
        };
        insta::assert_snapshot!(format!("; {pass} (changed: {changed})\n{}", print_function(&func)));
    });
}
