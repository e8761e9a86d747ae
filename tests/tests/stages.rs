//! Snapshots of every stage of lowering of the seed's forward kernel. Each stage must print
//! deterministic text; a change in the text is a change in the compiler to review.

mod common;

use lnc::{DumpRequest, Stage};

const FWD_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024";

const DX_SIG: &str = "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,*i32,i32,i32,fp32,64,1024";
const DWDB_SIG: &str = "*fp32,*fp32,*fp32,*fp32,i32,i32,32,128";

fn dump(stage: Stage, checked: bool) -> String {
    dump_kernel("_layer_norm_fwd_fused", FWD_SIG, stage, checked)
}

/// The options of the snapshots, the same on every host.
fn fixed() -> lnc::CompileOptions {
    // The default streaming threshold is the host's cache size: fixed here (8 MiB) so that
    // the Cranelift IR prints the same everywhere. For the same reason the subtractions
    // stay subtractions: they become multiply-adds only on a host with FMA
    // (`layer_norm_fwd.rs` checks those). Tiles have 8 lanes (hosts with AVX2), computed
    // in pairs of 128-bit vectors: which loops run in 256 bits depends on the host
    // (`fwd_clif_wide` shows them).
    lnc::CompileOptions {
        verify: true,
        stream_threshold: 8 << 20,
        fused_subs: false,
        lanes: 8,
        wide: false,
        ..Default::default()
    }
}

fn dump_kernel(kernel: &str, sig: &str, stage: Stage, checked: bool) -> String {
    dump_with(fixed(), kernel, sig, stage, checked)
}

fn dump_with(opts: lnc::CompileOptions, kernel: &str, sig: &str, stage: Stage, checked: bool) -> String {
    let jit = lnc::Jit::with_options(opts);
    let module = jit.module("triton_05_layer_norm.py", common::seed_source()).expect("seed parses");
    let req = DumpRequest { stages: vec![stage], checked, ..Default::default() };
    let dumps = module.dump(kernel, sig, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dumps.len(), 1);
    dumps.into_iter().next().map(|d| d.text).unwrap_or_default()
}

#[test]
fn fwd_ast() {
    insta::assert_snapshot!(dump(Stage::Ast, true));
}

#[test]
fn fwd_bir() {
    insta::assert_snapshot!(dump(Stage::Bir, true));
}

#[test]
fn fwd_opt() {
    insta::assert_snapshot!(dump(Stage::Opt, true));
}

#[test]
fn fwd_lir() {
    insta::assert_snapshot!(dump(Stage::Lir, true));
}

/// The Cranelift IR lnc generates; what Cranelift makes of it depends on the host's CPU
/// features, so only its presence is checked.
fn clif_as_generated(checked: bool) -> String {
    let text = dump(Stage::Clif, checked);
    let (before, after) = text.split_once(lnc::CLIF_AFTER).expect("both halves of the clif dump");
    assert!(after.contains("function"), "{after}");
    before.to_string()
}

#[test]
fn fwd_clif_checked() {
    insta::assert_snapshot!(clif_as_generated(true));
}

#[test]
fn fwd_clif_unchecked() {
    insta::assert_snapshot!(clif_as_generated(false));
}

/// The Cranelift IR of the forward where the host has AVX2: its loops of `fp32x8` tiles in
/// one `f32x4` value per tile, whose loads and stores carry the marks of lnc-clif's `wide`
/// and whose instructions are widened to 256 bits after Cranelift.
#[test]
fn fwd_clif_wide() {
    let wide = lnc::CompileOptions { wide: true, ..fixed() };
    let jit = lnc::Jit::with_options(wide.clone());
    let module = jit.module("triton_05_layer_norm.py", common::seed_source()).expect("seed parses");
    let k = module.kernel("_layer_norm_fwd_fused", FWD_SIG).unwrap_or_else(|e| panic!("{e}"));
    if !lnc::computes_wide() {
        assert_eq!(k.widened_instructions(), 0);
        return;
    }
    assert!(k.widened_instructions() > 50, "{}", k.widened_instructions());
    let text = dump_with(wide, "_layer_norm_fwd_fused", FWD_SIG, Stage::Clif, true);
    let (before, _) = text.split_once(lnc::CLIF_AFTER).expect("both halves of the clif dump");
    insta::assert_snapshot!(before);
}

#[test]
fn fwd_asm_is_deterministic() {
    // Machine code depends on the host's CPU features, so it is not snapshotted; it must
    // still be the same text on every run.
    let a = dump(Stage::Asm, true);
    assert!(a.lines().count() > 50, "{a}");
    assert_eq!(a, dump(Stage::Asm, true));
}

/// `--emit mc` shows the code as it runs, after lnc's rewrites: the 512-bit forms, the
/// `bf16` conversions, the non-temporal stores, which Cranelift's listing (`asm`) shows
/// as the 128-bit placeholders they replace. The same text on every run.
#[test]
fn mc_is_the_code_after_the_rewrites() {
    let mc =
        |sig: &str| dump_with(lnc::CompileOptions::default(), "_layer_norm_fwd_fused", sig, Stage::Mc, true);
    let bf16 = mc("*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,1024");
    assert_eq!(bf16, mc("*bf16,*bf16,*bf16,*bf16,*fp32,*fp32,i32,i32,fp32,1024"));
    assert!(bf16.lines().filter(|l| l.contains(':')).count() > 500, "{bf16}");
    assert!(bf16.trim_end().ends_with("(constants)"), "{bf16}");
    assert_eq!(bf16.contains("%zmm"), lnc::computes_zmm(), "{bf16}");
    assert_eq!(bf16.contains("vcvtneps2bf16"), lnc::rounds_bf16_natively(), "{bf16}");
    // The weight and bias rows convert through a runtime helper, named at its address's
    // placeholder.
    assert!(bf16.lines().any(|l| l.contains("movabs") && l.ends_with("; lnc_row_bf16_to_f32")), "{bf16}");
    let fp32 = mc("*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024");
    assert_eq!(fp32.contains("%ymm"), lnc::computes_wide(), "{fp32}");
    // The streaming copy of the output pass: non-temporal stores, which Cranelift's own
    // listing never has.
    assert!(fp32.contains("vmovntps") || fp32.contains("movntps"), "{fp32}");
    let asm = dump_with(
        lnc::CompileOptions::default(),
        "_layer_norm_fwd_fused",
        "*fp32,*fp32,*fp32,*fp32,*fp32,*fp32,i32,i32,fp32,1024",
        Stage::Asm,
        true,
    );
    assert!(!asm.lines().any(|l| !l.trim_start().starts_with(';') && l.contains("movnt")), "{asm}");
}

#[test]
fn print_after_all_shows_each_pass() {
    let jit = lnc::Jit::new();
    let module = jit.module("triton_05_layer_norm.py", common::seed_source()).unwrap();
    let req = DumpRequest { stages: vec![], after_each_pass: true, ..Default::default() };
    let dumps = module.dump("_layer_norm_fwd_fused", FWD_SIG, &req).unwrap_or_else(|e| panic!("{e}"));
    let passes: Vec<&str> = dumps.iter().filter_map(|d| d.pass).collect();
    for p in ["canonicalize", "constant-fold", "cse", "dce"] {
        assert!(passes.contains(&p), "no dump after {p}: {passes:?}");
    }
}

#[test]
fn bwd_dx_bir() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dx_fused", DX_SIG, Stage::Bir, true));
}

#[test]
fn bwd_dx_opt() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dx_fused", DX_SIG, Stage::Opt, true));
}

#[test]
fn bwd_dx_lir() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dx_fused", DX_SIG, Stage::Lir, true));
}

#[test]
fn bwd_dwdb_bir() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dwdb", DWDB_SIG, Stage::Bir, true));
}

#[test]
fn bwd_dwdb_opt() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dwdb", DWDB_SIG, Stage::Opt, true));
}

#[test]
fn bwd_dwdb_lir() {
    insta::assert_snapshot!(dump_kernel("_layer_norm_bwd_dwdb", DWDB_SIG, Stage::Lir, true));
}

/// The vector arithmetic of the forward's passes reads `w`, `b` and scratch rows straight
/// from memory at `disp(base, index, scale)`: Cranelift folds only one addition into a
/// load merged into an arithmetic instruction, so an address built as `(base + i·4) + 16`
/// or `(area + offset) + i·4` cost a `lea` per access in the loop (lnc-clif's
/// `split_address`).
#[test]
fn fwd_asm_folds_addresses_into_merged_loads() {
    let on_memory = ["vmulps", "vaddps", "vsubps", "vfmadd", "vfmsub", "vfnmadd"];
    for d in ["fp32", "fp16", "bf16"] {
        let sig = format!("*{d},*{d},*{d},*{d},*fp32,*fp32,i32,i32,fp32,4096");
        // 128-bit loops: the loads of 256-bit ones are never merged (lnc-clif's `wide`).
        let narrow = lnc::CompileOptions { stream_threshold: 8 << 20, ..Default::default() }.narrow();
        let asm = dump_with(narrow, "_layer_norm_fwd_fused", &sig, Stage::Asm, false);
        let mut merged = 0;
        for line in asm.lines().map(str::trim) {
            let Some((op, operands)) = line.split_once(' ') else { continue };
            if !on_memory.iter().any(|m| op.starts_with(m))
                || !operands.contains("(%")
                || operands.contains("%rip")
            {
                continue;
            }
            merged += 1;
            let mem = operands.split_once('(').and_then(|(_, m)| m.split_once(')')).map(|(m, _)| m);
            assert!(
                mem.is_some_and(|m| m.split(", ").count() == 3),
                "{d}: a merged load without an indexed address: `{line}`\n{asm}"
            );
        }
        assert!(merged >= 2, "{d}: no arithmetic on memory operands:\n{asm}");
    }
}

/// The innermost loops of `listing` (`--emit mc`): the instructions from a backward jump's
/// target to the jump, for jumps with no other backward jump inside.
fn innermost_loops(listing: &str) -> Vec<Vec<&str>> {
    let insts: Vec<(u64, &str)> = listing
        .lines()
        .filter_map(|l| {
            let (off, rest) = l.trim_start().split_once(':')?;
            Some((u64::from_str_radix(off, 16).ok()?, rest.trim()))
        })
        .collect();
    let back: Vec<(u64, u64)> = insts
        .iter()
        .filter(|(_, text)| text.starts_with('j'))
        .filter_map(|&(at, text)| {
            let target = text.split_whitespace().nth(1)?.strip_prefix("0x")?;
            let target = u64::from_str_radix(target, 16).ok()?;
            (target <= at).then_some((target, at))
        })
        .collect();
    back.iter()
        .filter(|&&(t, a)| !back.iter().any(|&(t2, a2)| (t2, a2) != (t, a) && t <= t2 && a2 <= a))
        .map(|&(t, a)| insts.iter().filter(|(o, _)| (t..=a).contains(o)).map(|&(_, text)| text).collect())
        .collect()
}

/// The seed forward's reduction loops (the mean's and the variance's, four accumulators
/// each) keep their bound in a register: regalloc2 kept the bound both loops share in a
/// stack slot inside them, reloaded and stored back every iteration, until the loops took
/// it as a block parameter (`lnc-clif`'s `codegen_for`): 9 % of the fp32 forward's time at
/// N = 512.
#[test]
fn reduction_loops_store_nothing_to_the_stack() {
    for dt in ["fp32", "fp16", "bf16"] {
        for block in [512, 1024, 4096] {
            for checked in [true, false] {
                let sig = format!("*{dt},*{dt},*{dt},*{dt},*fp32,*fp32,i32,i32,fp32,{block}");
                let mc = dump_with(
                    lnc::CompileOptions::default(),
                    "_layer_norm_fwd_fused",
                    &sig,
                    Stage::Mc,
                    checked,
                );
                let reductions: Vec<Vec<&str>> = innermost_loops(&mc)
                    .into_iter()
                    .filter(|body| {
                        body.iter().filter(|i| i.starts_with("vaddps") || i.starts_with("addps")).count() >= 4
                    })
                    .collect();
                assert!(
                    reductions.len() >= 2,
                    "{sig} checked {checked}: {} reduction loops\n{mc}",
                    reductions.len()
                );
                for body in reductions {
                    let spills: Vec<&&str> = body.iter().filter(|i| i.ends_with("(%rsp)")).collect();
                    assert!(
                        spills.is_empty(),
                        "{sig} checked {checked}: stores to the stack {spills:?} in\n{}",
                        body.join("\n")
                    );
                }
            }
        }
    }
}
