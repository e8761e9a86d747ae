//! The function body: the context struct, the region walk, control flow and the ABI.

use std::collections::{HashMap, HashSet};

use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self, AbiParam, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, StackSlot, StackSlotData,
    StackSlotKind, Type, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{DataDescription, Linkage, Module};
use lnc_lir::{self as lir, Const, DType, Opcode, Ty};
use lnc_runtime::abi::{NO_FAULT, Status, bounds_offsets, ctx_offsets};

use crate::value::{self, CVal, Tile};
use crate::{
    CodegenError, CodegenOptions, chain, half, hoist,
    induction::{self, Stepping},
    memory, num, ports, prefetch,
};

/// Everything the `codegen_*` functions share while translating one function.
pub(crate) struct FunctionCx<'a, 'b> {
    pub(crate) f: &'a lir::Function,
    pub(crate) opts: &'a CodegenOptions,
    pub(crate) module: &'a mut JITModule,
    pub(crate) bcx: FunctionBuilder<'b>,
    /// The Cranelift values of every loop-IR value defined so far.
    values: SecondaryMap<lir::Value, Option<CVal>>,
    /// The blocks of each control-flow instruction, created up front.
    blocks: SecondaryMap<lir::Inst, Vec<Block>>,
    /// The kernel's parameters: argument slots, first pid, grid size, context.
    pub(crate) abi: [Value; 4],
    /// The program being run: its id on each axis, and how many programs of the call are
    /// left, itself included (the parameters of the per-program loop's header).
    pid: [Value; 3],
    left: Value,
    /// The call's program count.
    count: Value,
    helpers: HashMap<&'static str, FuncRef>,
    /// The shared exit of failed bounds checks, `(site: i32, arg: i32, offset: i64)`.
    oob_block: Option<Block>,
    /// The shared exit of failed asserts, `(site: i32, arg: i32)`.
    assert_block: Option<Block>,
    /// The `while` loops that may wait for another program (they use atomics or volatile
    /// loads), and the stack slot holding the context pointer for them.
    waiting: Option<(HashSet<lir::Inst>, StackSlot)>,
    /// The shared exit of programs that give up waiting because another one faulted.
    cancel_block: Option<Block>,
    /// What bounds checks need of each checked argument, loaded once in the entry block
    /// so that they dominate every access and stay out of loops.
    pub(crate) checked_args: HashMap<u32, ArgBounds>,
    /// The 16-bit patterns (in `i32` lanes) of half values already known, by the `f32`
    /// value and dtype: a store of a loaded or rounded value reuses them (`half.rs`).
    pub(crate) half_bits: HashMap<(Value, DType), Value>,
    /// Accesses whose bounds check was hoisted in front of their loop (`hoist.rs`) or of a
    /// run of loops (`chain.rs`).
    pub(crate) prechecked: HashSet<lir::Inst>,
    /// Range checks made so far, one list per region being emitted, innermost last.
    pub(crate) proven: Vec<Vec<chain::Proven>>,
    /// Loads of half values quiet their NaNs (false while loading a value only float
    /// arithmetic consumes, `half.rs`).
    pub(crate) half_quiet: bool,
    /// The users of every loop-IR value, computed when first needed (`half.rs`).
    pub(crate) uses: Option<HashMap<lir::Value, Vec<lir::Inst>>>,
    /// Intervals of the integer scalars (`induction.rs`).
    pub(crate) ranges: lir::ranges::Ranges,
    /// The `i64` copies of loop indices (`induction.rs`).
    pub(crate) wide: HashMap<lir::Value, Value>,
    /// Emitting the copy of a loop whose streaming stores bypass the caches.
    pub(crate) streaming: bool,
    /// Helper calls emitted so far.
    calls: u32,
    /// Vector subtractions emitted as multiply-adds by 1 (`ports.rs`).
    fused_subs: HashSet<lir::Inst>,
    /// For each loop, the scalars it broadcasts, when the function calls helpers (they
    /// are kept in stack slots, [`reload_broadcast_scalars`]); empty otherwise.
    broadcasts: HashMap<lir::Inst, Vec<lir::Value>>,
    /// All of those scalars.
    rebroadcast: HashSet<lir::Value>,
    /// Their slots, and the number of calls emitted when each was saved.
    saved: HashMap<lir::Value, (StackSlot, u32)>,
    /// The alias region of the loads standing for prefetches (`prefetch.rs`).
    pub(crate) prefetch_region: Option<cranelift_codegen::ir::AliasRegion>,
    /// `fp16` tiles widen with F16C (`f16c.rs`).
    pub(crate) f16c: bool,
    /// The instruction being emitted has an `fp16` tile result that only stores use
    /// ([`half::only_stored`]): its rounding is left to them.
    pub(crate) only_stored: bool,
    /// Some `fp16` tile was rounded with F16C through the scratch area's last 16 bytes
    /// ([`f16c_round_offset`]).
    pub(crate) f16c_rounds: bool,
    /// The loops emitted in wide parts (module `wide`).
    pub(crate) wide_loops: HashSet<lir::Inst>,
    /// Lanes of one wide part: 8 (256-bit loops) or 16 (512-bit loops).
    pub(crate) wide_per: u8,
    /// The additions after the wide loop being emitted that its exit computes in wide
    /// parts (`wide::exit_sums`).
    pub(crate) exit_sums: Vec<lir::Inst>,
    /// Instructions already emitted with an earlier one (those additions).
    pub(crate) folded: HashSet<lir::Inst>,
    /// The broadcast constants of the `bf16` stores of the wide loop being emitted
    /// (`wide::store_bf16`).
    pub(crate) bf16_consts: Option<crate::wide::Bf16Consts>,
    /// `bf16` stores of 512-bit loops round with `vcvtneps2bf16` (`wide::store_bf16`).
    pub(crate) bf16_cvt: bool,
    /// Emitting the body of one of them.
    pub(crate) in_wide: bool,
    /// Wide loops emitted so far.
    pub(crate) wide_emitted: u32,
    /// Marked stores of wide parts emitted (module `wide`).
    pub(crate) wide_stores: u32,
    /// Tiles moved into or out of wide loops so far (`wide::staging_offset`).
    pub(crate) wide_transfers: u32,
    /// Lane groups taken out of wide parts by a register instruction (`wide::leave`).
    pub(crate) wide_extracts: u32,
    /// The broadcasts of the constants of the wide loop being emitted
    /// (`wide::broadcast_constants`).
    pub(crate) wide_consts: HashMap<lir::Value, Value>,
    /// [`crate::CodegenOptions::bcast_in_loop`].
    pub(crate) bcast_in_loop: bool,
    /// [`crate::CodegenOptions::stage_exits`].
    pub(crate) stage_exits: bool,
    /// With `bcast_in_loop`, the address in scratch of each scalar the current wide loop
    /// broadcasts, stored in front of it (module `wide`).
    pub(crate) wide_scalars: HashMap<lir::Value, Value>,
}

/// Where in the scratch area `fp16` tiles are rounded with F16C (module `f16c`): 16 bytes
/// after the kernel's buffers.
pub(crate) fn f16c_round_offset(f: &lir::Function) -> i64 {
    i64::from(f.scratch_bytes().next_multiple_of(16))
}

/// The bounds of one pointer argument in the form checks use: an access of `bytes`
/// bytes at address `a` is inside when `a - origin <u max(span - bytes + 1, 0)`.
#[derive(Clone, Copy)]
pub(crate) struct ArgBounds {
    /// `base + lo`: the lowest valid address.
    pub(crate) origin: Value,
    /// `hi - lo`: the size of the valid range.
    pub(crate) span: Value,
}

/// Flags of reads of the ABI's inputs (argument slots, pids, bounds, the context's
/// pointers): never written while the kernel runs, so Cranelift may merge and hoist them.
pub(crate) fn abi_flags() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly().with_can_move()
}

/// Flags of the kernel's own memory accesses: unaligned, little-endian.
pub(crate) fn data_flags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(ir::Endianness::Little).with_notrap()
}

/// An integer constant of type `ty`; Cranelift wants narrow immediates zero-extended.
pub(crate) fn iconst(bcx: &mut FunctionBuilder, ty: Type, v: i64) -> Value {
    let bits = ty.bits();
    let v = if bits >= 64 { v } else { v & ((1i64 << bits) - 1) };
    bcx.ins().iconst(ty, v)
}

pub(crate) fn block_args(vals: &[Value]) -> Vec<BlockArg> {
    vals.iter().map(|&v| BlockArg::Value(v)).collect()
}

pub(crate) fn codegen_fn(
    module: &mut JITModule,
    func: &mut ir::Function,
    f: &lir::Function,
    opts: &CodegenOptions,
) -> Result<(usize, u32, u32), CodegenError> {
    let mut func_ctx = FunctionBuilderContext::new();
    let mut bcx = FunctionBuilder::new(func, &mut func_ctx);
    let entry = bcx.create_block();
    bcx.append_block_params_for_function_params(entry);
    let ranges = lir::ranges::Ranges::analyze(f);
    let wide_per = opts.wide_per();
    let wide_loops = if opts.wide && crate::marks::isa_has(module.isa(), "has_avx2") {
        crate::wide::loops(f, &ranges, opts.f16c && crate::f16c::available(module.isa()), wide_per)
    } else {
        HashSet::new()
    };
    let blocks = create_blocks(&mut bcx, f, &ranges, &wide_loops, wide_per)?;
    bcx.switch_to_block(entry);
    let params = bcx.block_params(entry);
    let abi = [params[0], params[1], params[2], params[3]];
    let count = params[4];
    let program = bcx.create_block();
    for ty in [types::I32, types::I32, types::I32, types::I64] {
        bcx.append_block_param(program, ty);
    }
    let pid = {
        let p = bcx.block_params(program);
        [p[0], p[1], p[2]]
    };
    let left = bcx.block_params(program)[3];
    let mut fx = FunctionCx {
        f,
        opts,
        module,
        bcx,
        values: SecondaryMap::new(),
        blocks,
        abi,
        pid,
        left,
        count,
        helpers: HashMap::new(),
        oob_block: None,
        assert_block: None,
        waiting: None,
        cancel_block: None,
        checked_args: HashMap::new(),
        half_bits: HashMap::new(),
        prechecked: HashSet::new(),
        proven: Vec::new(),
        half_quiet: true,
        uses: None,
        ranges,
        wide: HashMap::new(),
        streaming: false,
        calls: 0,
        fused_subs: HashSet::new(),
        broadcasts: HashMap::new(),
        rebroadcast: HashSet::new(),
        saved: HashMap::new(),
        prefetch_region: None,
        f16c: false,
        f16c_rounds: false,
        only_stored: false,
        wide_loops,
        wide_per,
        exit_sums: Vec::new(),
        folded: HashSet::new(),
        bf16_consts: None,
        bf16_cvt: opts.bf16_cvt && wide_per == crate::wide::ZMM_PER && crate::rounds_bf16_natively(),
        in_wide: false,
        wide_emitted: 0,
        wide_stores: 0,
        wide_transfers: 0,
        wide_extracts: 0,
        wide_consts: HashMap::new(),
        bcast_in_loop: opts.bcast_in_loop,
        stage_exits: opts.stage_exits,
        wide_scalars: HashMap::new(),
    };
    fx.broadcasts = loop_broadcasts(f);
    fx.rebroadcast = fx.broadcasts.values().flatten().copied().collect();
    if opts.fused_subs && ports::host_has_fma(fx.module.isa()) {
        fx.fused_subs = ports::fused_subs(f);
    }
    fx.f16c = opts.f16c && crate::f16c::available(fx.module.isa());
    if opts.checked {
        load_checked_args(&mut fx)?;
    }
    let mut waiting = HashSet::new();
    f.walk(|i| {
        if f.insts[i].opcode == Opcode::While && uses_atomics(f, i) {
            waiting.insert(i);
        }
    });
    if !waiting.is_empty() {
        // The context pointer is kept in a stack slot for the loops that may wait (see
        // `give_up_after_fault`): they only read it while waiting, and in a register it
        // would take one from every loop of the kernel.
        let slot = fx.bcx.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        fx.bcx.ins().stack_store(types::I64, fx.abi[3], slot, 0);
        fx.waiting = Some((waiting, slot));
    }
    let grid = program_loop_head(&mut fx, program);
    if codegen_region(&mut fx, &f.body, &[])?.is_some() {
        return Err(CodegenError::InvalidIr("the body ends with a terminator".into()));
    }
    program_loop_latch(&mut fx, program, grid);
    fx.fill_exit_blocks();
    fx.bcx.seal_all_blocks();
    let config = fx.module.target_config();
    fx.bcx.finalize(config);
    // The scratch bytes a program needs.
    let scratch = if fx.wide_transfers > 0 {
        (crate::wide::staging_offset(f) + crate::wide::staging_bytes(wide_per) * i64::from(fx.wide_transfers))
            as usize
    } else if fx.f16c_rounds {
        f16c_round_offset(f) as usize + 16
    } else {
        f.scratch_bytes() as usize
    };
    Ok((scratch, fx.wide_stores, fx.wide_extracts))
}

/// Starts the loop over the call's programs: loads the first pid and jumps to `program`,
/// the loop's header, where the body is emitted next. Returns the grid's extent on axes 0
/// and 1, which the latch needs to step the pid.
///
/// What does not depend on the pid (argument slots, bounds, the scratch pointer) is loaded
/// from the ABI with flags that let Cranelift hoist it out of this loop, so a call pays for
/// it once per chunk of programs rather than once per program.
fn program_loop_head(fx: &mut FunctionCx, program: Block) -> [Value; 2] {
    let first: Vec<Value> = (0..3).map(|axis| fx.load_abi(types::I32, fx.abi[1], axis * 4)).collect();
    let grid = [fx.load_abi(types::I32, fx.abi[2], 0), fx.load_abi(types::I32, fx.abi[2], 4)];
    let args = block_args(&[first[0], first[1], first[2], fx.count]);
    fx.bcx.ins().jump(program, &args);
    fx.bcx.switch_to_block(program);
    grid
}

/// Ends the body of the program loop: returns `Ok` after the call's last program, otherwise
/// steps the pid in flat order (axis 0 fastest) and runs the next one.
fn program_loop_latch(fx: &mut FunctionCx, program: Block, grid: [Value; 2]) {
    let left = fx.bcx.ins().iadd_imm_s(fx.left, -1);
    let done = fx.bcx.create_block();
    let next = fx.bcx.create_block();
    fx.bcx.ins().brif(left, next, &[], done, &[]);
    fx.bcx.switch_to_block(done);
    let ok = fx.bcx.ins().iconst(types::I32, Status::Ok as i64);
    fx.bcx.ins().return_(&[ok]);
    fx.bcx.switch_to_block(next);
    let [p0, p1, p2] = fx.pid;
    let zero = fx.bcx.ins().iconst(types::I32, 0);
    let p0 = fx.bcx.ins().iadd_imm_s(p0, 1);
    let wrap0 = fx.bcx.ins().icmp(IntCC::Equal, p0, grid[0]);
    let p0 = fx.bcx.ins().select(wrap0, zero, p0);
    let carry0 = fx.bcx.ins().uextend(types::I32, wrap0);
    let p1 = fx.bcx.ins().iadd(p1, carry0);
    let wrap1 = fx.bcx.ins().icmp(IntCC::Equal, p1, grid[1]);
    let p1 = fx.bcx.ins().select(wrap1, zero, p1);
    let carry1 = fx.bcx.ins().uextend(types::I32, wrap1);
    let p2 = fx.bcx.ins().iadd(p2, carry1);
    let args = block_args(&[p0, p1, p2, left]);
    fx.bcx.ins().jump(program, &args);
}

/// Loads the bounds of every argument some access site names.
fn load_checked_args(fx: &mut FunctionCx) -> Result<(), CodegenError> {
    let mut args = Vec::new();
    let f = fx.f;
    f.walk(|inst| {
        if let Opcode::Load { site, .. }
        | Opcode::Store { site, .. }
        | Opcode::Atomic { site, .. }
        | Opcode::AtomicCas { site, .. }
        | Opcode::RowLoad { site, .. }
        | Opcode::RowStore { site, .. } = f.insts[inst].opcode
        {
            args.push(site);
        }
    });
    let mut sites: Vec<u32> =
        args.into_iter().map(|s| fx.site(s).map(|s| s.arg)).collect::<Result<_, _>>()?;
    sites.sort_unstable();
    sites.dedup();
    for arg in sites {
        let entry = i32::try_from(arg as i64 * bounds_offsets::SIZE as i64)
            .map_err(|_| CodegenError::InvalidIr(format!("argument slot {arg}")))?;
        let base = fx.arg_slot(arg)?;
        let bounds = fx.load_abi(types::I64, fx.abi[3], ctx_offsets::BOUNDS);
        let lo = fx.load_abi(types::I64, bounds, entry + bounds_offsets::LO);
        let hi = fx.load_abi(types::I64, bounds, entry + bounds_offsets::HI);
        let origin = fx.bcx.ins().iadd(base, lo);
        let span = fx.bcx.ins().isub(hi, lo);
        fx.checked_args.insert(arg, ArgBounds { origin, span });
    }
    Ok(())
}

/// Creates the blocks of every control-flow instruction with their parameters.
fn create_blocks(
    bcx: &mut FunctionBuilder,
    f: &lir::Function,
    ranges: &lir::ranges::Ranges,
    wide_loops: &HashSet<lir::Inst>,
    wide_per: u8,
) -> Result<SecondaryMap<lir::Inst, Vec<Block>>, CodegenError> {
    let mut map = SecondaryMap::new();
    let mut err = None;
    f.walk(|inst| {
        let data = &f.insts[inst];
        let result_tys: Vec<Ty> = data.results.iter().map(|&r| f.ty(r)).collect();
        let region_tys = |n: usize| -> Vec<Ty> {
            data.regions.get(n).map(|r| r.args.iter().map(|&a| f.ty(a)).collect()).unwrap_or_default()
        };
        // Parameter lists of the blocks, in order.
        let shapes: Vec<Vec<Ty>> = match data.opcode {
            // body(iv, carried...), exit(carried...); an index that never wraps runs in i64.
            Opcode::For => {
                let mut body = region_tys(0);
                if induction::stepping(f, ranges, inst) != Stepping::Checked {
                    body[0] = Ty::Scalar(DType::I64);
                }
                vec![body, result_tys]
            }
            // cond(carried...), body(fwd...), exit(fwd...)
            Opcode::While => vec![region_tys(0), region_tys(1), result_tys],
            // then, else, merge(results...)
            Opcode::If => vec![vec![], vec![], result_tys],
            _ => return,
        };
        let mut blocks = Vec::new();
        let wide = wide_loops.contains(&inst);
        for tys in shapes {
            let b = bcx.create_block();
            for ty in tys {
                let types =
                    if wide { crate::wide::carried_types(ty, wide_per) } else { value::canonical_types(ty) };
                match types {
                    Ok(cl) => {
                        for t in cl {
                            bcx.append_block_param(b, t);
                        }
                    }
                    Err(e) => err = err.take().or(Some(e)),
                }
            }
            blocks.push(b);
        }
        map[inst] = blocks;
    });
    match err {
        Some(e) => Err(e),
        None => Ok(map),
    }
}

/// What ended a region: the operands of its terminator.
pub(crate) enum Exit {
    /// `yield values...`
    Yield(Vec<CVal>),
    /// `condition(flag, values...)`
    Condition(Value, Vec<CVal>),
}

/// Translates the instructions of `region` with its arguments bound to `args`; returns
/// its terminator's operands, the builder left in the block that reaches it.
fn codegen_region(
    fx: &mut FunctionCx,
    region: &lir::Region,
    args: &[CVal],
) -> Result<Option<Exit>, CodegenError> {
    if region.args.len() != args.len() {
        return Err(CodegenError::InvalidIr(format!(
            "a region has {} arguments, {} given",
            region.args.len(),
            args.len()
        )));
    }
    for (&a, v) in region.args.iter().zip(args) {
        fx.def(a, v.clone());
    }
    fx.proven.push(Vec::new());
    let exit = codegen_insts(fx, &region.insts);
    fx.proven.pop();
    exit
}

fn codegen_insts(fx: &mut FunctionCx, insts: &[lir::Inst]) -> Result<Option<Exit>, CodegenError> {
    let region_len = insts.len();
    for (n, &inst) in insts.iter().enumerate() {
        let data = &fx.f.insts[inst];
        match data.opcode {
            Opcode::Yield | Opcode::Condition => {
                if n + 1 != region_len {
                    return Err(CodegenError::InvalidIr(format!(
                        "terminator {inst} is not last in its region"
                    )));
                }
                let vals = data.args.iter().map(|&a| fx.val(a)).collect::<Result<Vec<_>, _>>()?;
                return Ok(Some(if data.opcode == Opcode::Yield {
                    Exit::Yield(vals)
                } else {
                    let flag = vals
                        .first()
                        .ok_or_else(|| CodegenError::InvalidIr("condition without a flag".into()))?
                        .scalar()?;
                    Exit::Condition(flag, vals[1..].to_vec())
                }));
            }
            _ if fx.folded.contains(&inst) => {}
            Opcode::For => {
                chain::emit_run_checks(fx, insts, n)?;
                if fx.wide_loops.contains(&inst) {
                    fx.exit_sums = crate::wide::exit_sums(fx, insts, n);
                }
                codegen_inst(fx, inst)?
            }
            _ if fx.in_wide && data.results.iter().chain(&data.args).any(|&v| fx.f.ty(v).is_tile()) => {
                crate::wide::codegen_inst(fx, inst)?
            }
            _ => codegen_inst(fx, inst)?,
        }
        save_broadcast_scalars(fx, inst);
    }
    Ok(None)
}

impl FunctionCx<'_, '_> {
    pub(crate) fn def(&mut self, v: lir::Value, c: CVal) {
        self.values[v] = Some(c);
    }

    /// Whether `v` has been translated already (is defined before the current point).
    pub(crate) fn is_defined(&self, v: lir::Value) -> bool {
        self.values[v].is_some()
    }

    pub(crate) fn val(&self, v: lir::Value) -> Result<CVal, CodegenError> {
        self.values[v]
            .clone()
            .ok_or_else(|| CodegenError::InvalidIr(format!("{v} is used before it is defined")))
    }

    pub(crate) fn scalar(&self, v: lir::Value) -> Result<Value, CodegenError> {
        self.val(v)?.scalar()
    }

    /// The value as a tile; a scalar operand is broadcast to `lanes` lanes.
    pub(crate) fn tile(&mut self, v: lir::Value, lanes: u8) -> Result<Tile, CodegenError> {
        match self.val(v)? {
            CVal::Tile(t) => Ok(t),
            CVal::Scalar(s) => {
                let d = self.f.ty(v).dtype();
                let per = value::canonical_per(d, lanes)?;
                value::splat(&mut self.bcx, d, lanes, per, s)
            }
        }
    }

    /// Calls a helper of [`crate::helpers`].
    pub(crate) fn call_helper(
        &mut self,
        name: &'static str,
        params: &[Type],
        returns: &[Type],
        args: &[Value],
    ) -> Result<Vec<Value>, CodegenError> {
        // Module `widen` takes the registers past these as dead at a call.
        if params.iter().filter(|t| t.is_float() || t.is_vector()).count()
            > crate::widen::CALL_VECTOR_ARGUMENTS
        {
            return Err(CodegenError::InvalidIr(format!("helper {name} takes too many vector arguments")));
        }
        let func_ref = match self.helpers.get(name) {
            Some(&r) => r,
            None => {
                let mut sig = self.module.make_signature();
                sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
                sig.returns.extend(returns.iter().map(|&t| AbiParam::new(t)));
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(crate::cranelift_error)?;
                let r = self.module.declare_func_in_func(id, self.bcx.func);
                self.helpers.insert(name, r);
                r
            }
        };
        self.calls += 1;
        let call = self.bcx.ins().call(func_ref, args);
        Ok(self.bcx.inst_results(call).to_vec())
    }

    /// Loads a `ty` at `base + offset` of the ABI's read-only inputs.
    pub(crate) fn load_abi(&mut self, ty: Type, base: Value, offset: i32) -> Value {
        self.bcx.ins().load(ty, abi_flags(), base, offset)
    }

    /// The raw 64-bit slot of argument `slot`.
    pub(crate) fn arg_slot(&mut self, slot: u32) -> Result<Value, CodegenError> {
        let offset = i32::try_from(slot as u64 * 8)
            .map_err(|_| CodegenError::InvalidIr(format!("argument slot {slot}")))?;
        Ok(self.load_abi(types::I64, self.abi[0], offset))
    }

    /// Ends the current block with a jump to the shared out-of-bounds exit: the access of
    /// `site`, whose elements are `1 << shift` bytes, left its argument's bounds, and
    /// `addr` is the address of its first element or of the lowest lane at fault.
    pub(crate) fn fail_out_of_bounds(
        &mut self,
        site: u32,
        addr: Value,
        shift: u32,
    ) -> Result<(), CodegenError> {
        let arg = self.site(site)?.arg;
        let b = self.oob_block();
        let site_v = self.bcx.ins().iconst(types::I32, site as i64);
        let arg_v = self.bcx.ins().iconst(types::I32, arg as i64);
        let shift_v = self.bcx.ins().iconst(types::I64, shift as i64);
        self.bcx.ins().jump(b, &block_args(&[site_v, arg_v, addr, shift_v]));
        Ok(())
    }

    /// The shared out-of-bounds exit, `(site: i32, arg: i32, addr: i64, shift: i64)`;
    /// filled by [`FunctionCx::fill_exit_blocks`] (a block cannot be left half-built).
    /// The element to report is computed there, once, not at every check.
    fn oob_block(&mut self) -> Block {
        if let Some(b) = self.oob_block {
            return b;
        }
        let b = self.bcx.create_block();
        self.bcx.set_cold_block(b);
        for ty in [types::I32, types::I32, types::I64, types::I64] {
            self.bcx.append_block_param(b, ty);
        }
        self.oob_block = Some(b);
        b
    }

    /// The shared block that records a failed assert and returns.
    fn assert_block(&mut self) -> Block {
        if let Some(b) = self.assert_block {
            return b;
        }
        let b = self.bcx.create_block();
        self.bcx.set_cold_block(b);
        for ty in [types::I32, types::I32] {
            self.bcx.append_block_param(b, ty);
        }
        self.assert_block = Some(b);
        b
    }

    /// Returns [`Status::Cancelled`] if a program of the launch has faulted (see the ABI
    /// on `ProgramCtx::stop`): emitted at the top of each turn of a loop that may wait for
    /// another program, which may have faulted while holding the lock it waits for.
    fn give_up_after_fault(&mut self, slot: StackSlot) {
        // An atomic load: Cranelift keeps a plain one out of the loop if nothing in it
        // writes memory it knows of. The context pointer comes from its slot, so that it
        // holds no register through the kernel's other loops.
        let ctx = self.bcx.ins().stack_load(types::I64, types::I64, slot, 0);
        let stop = self.bcx.ins().load(types::I64, MemFlagsData::trusted(), ctx, ctx_offsets::STOP);
        let lowest = self.bcx.ins().atomic_load(types::I64, MemFlagsData::trusted(), stop);
        let faulted = self.bcx.ins().icmp_imm_s(IntCC::NotEqual, lowest, NO_FAULT as i64);
        let cancel = self.cancel_block();
        let go_on = self.bcx.create_block();
        self.bcx.ins().brif(faulted, cancel, &[], go_on, &[]);
        self.bcx.switch_to_block(go_on);
    }

    /// The shared exit of programs that give up waiting, filled by
    /// [`FunctionCx::fill_exit_blocks`].
    fn cancel_block(&mut self) -> Block {
        if let Some(b) = self.cancel_block {
            return b;
        }
        let b = self.bcx.create_block();
        self.bcx.set_cold_block(b);
        self.cancel_block = Some(b);
        b
    }

    /// Emits the bodies of the shared exit blocks used so far.
    fn fill_exit_blocks(&mut self) {
        if let Some(b) = self.oob_block {
            self.bcx.switch_to_block(b);
            let &[site, arg, addr, shift] = self.bcx.block_params(b) else {
                unreachable!("created with four parameters")
            };
            // The argument's address and bounds, looked up by slot at run time.
            let slot = self.bcx.ins().uextend(types::I64, arg);
            let slot_off = self.bcx.ins().ishl_imm_u(slot, 3);
            let slot_addr = self.bcx.ins().iadd(self.abi[0], slot_off);
            let base = self.load_abi(types::I64, slot_addr, 0);
            let table = self.load_abi(types::I64, self.abi[3], ctx_offsets::BOUNDS);
            let entry_off = self.bcx.ins().imul_imm_u(slot, bounds_offsets::SIZE as i64);
            let entry = self.bcx.ins().iadd(table, entry_off);
            let lo = self.load_abi(types::I64, entry, bounds_offsets::LO);
            let hi = self.load_abi(types::I64, entry, bounds_offsets::HI);
            // Below the bounds: `addr` itself. Otherwise the first element from `addr` on
            // that reaches past the end.
            let off = self.bcx.ins().isub(addr, base);
            let room = self.bcx.ins().isub(hi, off);
            let k = self.bcx.ins().sshr(room, shift);
            let zero = self.bcx.ins().iconst(types::I64, 0);
            let k = self.bcx.ins().smax(k, zero);
            let below = self.bcx.ins().icmp(IntCC::SignedLessThan, off, lo);
            let k = self.bcx.ins().select(below, zero, k);
            let first = self.bcx.ins().sshr(off, shift);
            let elem = self.bcx.ins().iadd(first, k);
            self.store_fault(site, arg, elem);
            let status = self.bcx.ins().iconst(types::I32, Status::OutOfBounds as i64);
            self.bcx.ins().return_(&[status]);
        }
        if let (Some(b), Some((_, slot))) = (self.cancel_block, &self.waiting) {
            let slot = *slot;
            self.bcx.switch_to_block(b);
            // `left`, not `count - left` as faults store: the call's count would otherwise
            // hold a register through every loop (see `Status::Cancelled`).
            let ctx = self.bcx.ins().stack_load(types::I64, types::I64, slot, 0);
            self.bcx.ins().store(MemFlagsData::trusted(), self.left, ctx, ctx_offsets::RAN);
            let status = self.bcx.ins().iconst(types::I32, Status::Cancelled as i64);
            self.bcx.ins().return_(&[status]);
        }
        if let Some(b) = self.assert_block {
            self.bcx.switch_to_block(b);
            let &[site, arg] = self.bcx.block_params(b) else { unreachable!("created with two parameters") };
            let zero = self.bcx.ins().iconst(types::I64, 0);
            self.store_fault(site, arg, zero);
            let status = self.bcx.ins().iconst(types::I32, Status::AssertFailed as i64);
            self.bcx.ins().return_(&[status]);
        }
    }

    /// Records a fault, and how many programs of the call finished before this one.
    fn store_fault(&mut self, site: Value, arg: Value, offset: Value) {
        let ctx = self.abi[3];
        let flags = MemFlagsData::trusted();
        self.bcx.ins().store(flags, site, ctx, ctx_offsets::FAULT_SITE);
        self.bcx.ins().store(flags, arg, ctx, ctx_offsets::FAULT_ARG);
        self.bcx.ins().store(flags, offset, ctx, ctx_offsets::FAULT_OFFSET);
        let ran = self.bcx.ins().isub(self.count, self.left);
        self.bcx.ins().store(flags, ran, ctx, ctx_offsets::RAN);
    }

    pub(crate) fn site(&self, site: u32) -> Result<lir::Site, CodegenError> {
        self.f
            .sites
            .get(site as usize)
            .copied()
            .ok_or_else(|| CodegenError::InvalidIr(format!("site {site} is not in the site table")))
    }
}

fn codegen_inst(fx: &mut FunctionCx, inst: lir::Inst) -> Result<(), CodegenError> {
    let data = &fx.f.insts[inst];
    let result_ty = data.results.first().map(|&r| fx.f.ty(r));
    let result = |n: usize| -> Result<Ty, CodegenError> {
        result_ty
            .filter(|_| data.results.len() == n)
            .ok_or_else(|| CodegenError::InvalidIr(format!("{inst}: wrong number of results")))
    };
    let nargs = |n: usize| -> Result<(), CodegenError> {
        if data.args.len() == n {
            Ok(())
        } else {
            Err(CodegenError::InvalidIr(format!("{inst}: expected {n} operands")))
        }
    };
    // A memory access through operands 0 (pointer) and 1 (offset), checked here unless a
    // check in front of its loop covered it.
    let checked = !fx.prechecked.contains(&inst);
    let access = |addr, site| memory::Access { ptr: data.args[0], offset: data.args[1], addr, site, checked };
    // (Instructions with regions set it for their own instructions, and round nothing.)
    fx.only_stored =
        data.regions.is_empty() && data.results.len() == 1 && half::only_stored(fx, data.results[0]);
    let out: CVal = match data.opcode {
        Opcode::Arg(slot) => {
            nargs(0)?;
            codegen_arg(fx, slot, result(1)?)?
        }
        Opcode::Const(c) => {
            nargs(0)?;
            codegen_const(fx, c, result(1)?)?
        }
        Opcode::ProgramId(axis) | Opcode::NumPrograms(axis) => {
            nargs(0)?;
            if axis > 2 {
                return Err(CodegenError::InvalidIr(format!("{inst}: axis {axis}")));
            }
            CVal::Scalar(match data.opcode {
                Opcode::ProgramId(_) => fx.pid[axis as usize],
                _ => fx.load_abi(types::I32, fx.abi[2], axis as i32 * 4),
            })
        }
        Opcode::Splat => {
            nargs(1)?;
            let Ty::Tile(d, lanes) = result(1)? else {
                return Err(CodegenError::InvalidIr(format!("{inst}: splat to a non-tile")));
            };
            let s = fx.scalar(data.args[0])?;
            CVal::Tile(value::splat(&mut fx.bcx, d, lanes, value::canonical_per(d, lanes)?, s)?)
        }
        Opcode::Iota => {
            nargs(1)?;
            num::codegen_iota(fx, data.args[0], result(1)?)?
        }
        Opcode::Binary(lir::BinOp::Sub) if fx.fused_subs.contains(&inst) => {
            nargs(2)?;
            num::codegen_fused_sub(fx, data.args[0], data.args[1], result(1)?)?
        }
        Opcode::Binary(op) => {
            nargs(2)?;
            num::codegen_binary(fx, op, data.args[0], data.args[1], result(1)?)?
        }
        Opcode::Cmp(op) => {
            nargs(2)?;
            num::codegen_cmp(fx, op, data.args[0], data.args[1], result(1)?)?
        }
        Opcode::Unary(op) => {
            nargs(1)?;
            num::codegen_unary(fx, op, data.args[0], result(1)?)?
        }
        Opcode::Select => {
            nargs(3)?;
            num::codegen_select(fx, data.args[0], data.args[1], data.args[2], result(1)?)?
        }
        Opcode::Fma => {
            nargs(3)?;
            num::codegen_fma(fx, [data.args[0], data.args[1], data.args[2]], result(1)?)?
        }
        Opcode::Cast => {
            nargs(1)?;
            num::codegen_cast(fx, data.args[0], result(1)?)?
        }
        Opcode::Bitcast => {
            nargs(1)?;
            num::codegen_bitcast(fx, data.args[0], result(1)?)?
        }
        Opcode::PtrAdd => {
            nargs(2)?;
            memory::codegen_ptr_add(fx, data.args[0], data.args[1])?
        }
        Opcode::Load { addr, has_mask, has_other, site, volatile } => {
            nargs(2 + has_mask as usize + has_other as usize)?;
            let mask = has_mask.then(|| data.args[2]);
            let other = has_other.then(|| data.args[2 + has_mask as usize]);
            let access = access(addr, site);
            fx.half_quiet = !half::only_arithmetic(fx, data.results[0]);
            let loaded = memory::codegen_load(fx, access, (mask, other), result(1)?, volatile);
            fx.half_quiet = true;
            loaded?
        }
        Opcode::Store { addr, has_mask, site, stream, check_only } => {
            nargs(3 + has_mask as usize + stream as usize)?;
            let mask = has_mask.then(|| data.args[3]);
            let access = access(addr, site);
            if check_only {
                let lanes = fx.f.ty(data.args[2]).lanes();
                return memory::codegen_check(fx, access, lanes, mask);
            }
            // Only the copy of the loop that `stream_ok` selected streams (codegen_for).
            let stream = stream && fx.streaming;
            memory::codegen_store(fx, access, data.args[2], mask, stream)?;
            return Ok(());
        }
        Opcode::LineGap => {
            nargs(1)?;
            let p = fx.scalar(data.args[0])?;
            let size = fx.f.ty(data.args[0]).dtype().size();
            CVal::Scalar(line_gap(fx, p, size))
        }
        Opcode::StreamOk => {
            nargs(2)?;
            let (p, n) = (fx.scalar(data.args[0])?, fx.scalar(data.args[1])?);
            let size = fx.f.ty(data.args[0]).dtype().size();
            CVal::Scalar(stream_ok(fx, p, n, size))
        }
        Opcode::Atomic { op, addr, has_mask, site } => {
            nargs(3 + has_mask as usize)?;
            let mask = has_mask.then(|| data.args[3]);
            let access = access(addr, site);
            memory::codegen_atomic(
                fx,
                access,
                memory::AtomicKind::Rmw(op),
                &[data.args[2]],
                mask,
                result(1)?,
            )?
        }
        Opcode::AtomicCas { addr, site } => {
            nargs(4)?;
            let access = access(addr, site);
            memory::codegen_atomic(
                fx,
                access,
                memory::AtomicKind::Cas,
                &[data.args[2], data.args[3]],
                None,
                result(1)?,
            )?
        }
        Opcode::ScratchLoad(slot) => {
            nargs(1)?;
            memory::codegen_scratch_load(fx, slot, data.args[0], result(1)?)?
        }
        Opcode::Prefetch { write } => {
            nargs(2)?;
            prefetch::codegen_prefetch(fx, data.args[0], data.args[1], write)?;
            return Ok(());
        }
        Opcode::ScratchStore(slot) => {
            nargs(2)?;
            memory::codegen_scratch_store(fx, slot, data.args[0], data.args[1])?;
            return Ok(());
        }
        Opcode::RowLoad { slot, site, .. } | Opcode::RowStore { slot, site, .. } => {
            let (load, once, stream) = match data.opcode {
                Opcode::RowLoad { once, .. } => (true, once, false),
                Opcode::RowStore { stream, .. } => (false, None, stream),
                _ => unreachable!("matched above"),
            };
            nargs(3 + stream as usize)?;
            let [ptr, offset, count] = [data.args[0], data.args[1], data.args[2]];
            let stream = stream.then(|| data.args[3]);
            return half::codegen_row(fx, (load, once, stream), (slot, site), [ptr, offset, count]);
        }
        Opcode::ReduceLanes(op) => {
            nargs(1)?;
            num::codegen_reduce_lanes(fx, op, data.args[0], result(1)?)?
        }
        Opcode::For => return codegen_for(fx, inst),
        Opcode::While => return codegen_while(fx, inst),
        Opcode::If => return codegen_if(fx, inst),
        Opcode::Yield | Opcode::Condition => {
            return Err(CodegenError::InvalidIr(format!("{inst}: terminator outside the end of a region")));
        }
        Opcode::Assert { site } => {
            nargs(1)?;
            return codegen_assert(fx, site, data.args[0]);
        }
        Opcode::Print(prefix) => return codegen_print(fx, prefix, &data.args),
    };
    fx.def(data.results[0], out);
    Ok(())
}

fn codegen_arg(fx: &mut FunctionCx, slot: u32, ty: Ty) -> Result<CVal, CodegenError> {
    let raw = fx.arg_slot(slot)?;
    let v = match ty {
        Ty::Ptr(_) | Ty::Scalar(DType::I64 | DType::U64) => raw,
        Ty::Scalar(DType::F64) => fx.bcx.ins().bitcast(types::F64, MemFlagsData::new(), raw),
        Ty::Scalar(DType::F32) => {
            let bits = fx.bcx.ins().ireduce(types::I32, raw);
            fx.bcx.ins().bitcast(types::F32, MemFlagsData::new(), bits)
        }
        Ty::Scalar(DType::I1) => {
            // Any non-zero slot is true; the canonical i1 is 0 or 1.
            fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, raw, 0)
        }
        Ty::Scalar(d) if half::is_half(d) => half::from_arg(&mut fx.bcx, d, raw),
        Ty::Scalar(d) => fx.bcx.ins().ireduce(value::scalar_type(d)?, raw),
        Ty::Tile(..) => {
            return Err(CodegenError::InvalidIr(format!("argument slot {slot} has tile type {ty}")));
        }
    };
    Ok(CVal::Scalar(v))
}

/// A scalar constant of dtype `d`.
pub(crate) fn const_scalar(bcx: &mut FunctionBuilder, c: Const, d: DType) -> Result<Value, CodegenError> {
    let ty = value::scalar_type(d)?;
    Ok(match (c, d) {
        (_, DType::F16 | DType::BF16) => bcx.ins().f32const(half::const_value(d, c)),
        (Const::Int(i), DType::F32) => bcx.ins().f32const(i as f32),
        (Const::Int(i), DType::F64) => bcx.ins().f64const(i as f64),
        (Const::Float(x), DType::F32) => bcx.ins().f32const(x as f32),
        (Const::Float(x), DType::F64) => bcx.ins().f64const(x),
        (Const::Int(i), DType::I1) => bcx.ins().iconst(ty, (i != 0) as i64),
        (Const::Float(x), DType::I1) => bcx.ins().iconst(ty, (x != 0.0) as i64),
        (Const::Int(i), _) => iconst(bcx, ty, i),
        (Const::Float(x), _) => iconst(bcx, ty, if d.is_signed() { x as i64 } else { x as u64 as i64 }),
    })
}

fn codegen_const(fx: &mut FunctionCx, c: Const, ty: Ty) -> Result<CVal, CodegenError> {
    let s = const_scalar(&mut fx.bcx, c, ty.dtype())?;
    Ok(match ty {
        Ty::Scalar(_) => CVal::Scalar(s),
        Ty::Tile(d, lanes) => {
            CVal::Tile(value::splat(&mut fx.bcx, d, lanes, value::canonical_per(d, lanes)?, s)?)
        }
        Ty::Ptr(_) => return Err(CodegenError::InvalidIr("a pointer constant".into())),
    })
}

/// Flattened canonical forms of `vals`, typed by `tys`.
fn canonical_args(fx: &mut FunctionCx, tys: &[Ty], vals: &[CVal]) -> Result<Vec<Value>, CodegenError> {
    if tys.len() != vals.len() {
        return Err(CodegenError::InvalidIr(format!(
            "{} values passed where {} are expected",
            vals.len(),
            tys.len()
        )));
    }
    let mut out = Vec::new();
    for (&ty, v) in tys.iter().zip(vals) {
        out.extend(value::to_canonical(&mut fx.bcx, ty, v)?);
    }
    Ok(out)
}

/// Splits the parameters of `block` into values of types `tys`.
fn block_vals(fx: &FunctionCx, block: Block, skip: usize, tys: &[Ty]) -> Result<Vec<CVal>, CodegenError> {
    let params = fx.bcx.block_params(block)[skip..].to_vec();
    let mut out = Vec::with_capacity(tys.len());
    let mut at = 0;
    for &ty in tys {
        let n = value::canonical_types(ty)?.len();
        out.push(value::from_flat(ty, &params[at..at + n])?);
        at += n;
    }
    Ok(out)
}

fn yielded(exit: Option<Exit>, what: &str) -> Result<Vec<CVal>, CodegenError> {
    match exit {
        Some(Exit::Yield(v)) => Ok(v),
        None => Ok(Vec::new()),
        Some(Exit::Condition(..)) => Err(CodegenError::InvalidIr(format!("{what} ends with `condition`"))),
    }
}

/// `iv` has not reached `ub`: `iv < ub` for a positive step, `iv > ub` for a negative
/// one, never for a zero step (Python's `range` rejects it; a loop that never steps
/// would never end). With a constant step (the usual case) Cranelift folds the choice
/// away.
fn loop_continues(fx: &mut FunctionCx, d: DType, iv: Value, ub: Value, step: Value) -> Value {
    if !d.is_signed() {
        let below = fx.bcx.ins().icmp(IntCC::UnsignedLessThan, iv, ub);
        let steps = fx.bcx.ins().icmp_imm_u(IntCC::NotEqual, step, 0);
        return fx.bcx.ins().band(below, steps);
    }
    let up = fx.bcx.ins().icmp_imm_s(IntCC::SignedGreaterThan, step, 0);
    let down = fx.bcx.ins().icmp_imm_s(IntCC::SignedLessThan, step, 0);
    let below = fx.bcx.ins().icmp(IntCC::SignedLessThan, iv, ub);
    let above = fx.bcx.ins().icmp(IntCC::SignedGreaterThan, iv, ub);
    let above = fx.bcx.ins().band(above, down);
    fx.bcx.ins().select(up, below, above)
}

/// `v` of an integer dtype `d` narrower than 64 bits, extended to `i64` by its signedness.
fn extend_to_i64(fx: &mut FunctionCx, d: DType, v: Value) -> Value {
    if d.is_signed() { fx.bcx.ins().sextend(types::I64, v) } else { fx.bcx.ins().uextend(types::I64, v) }
}

/// A rotated loop: the entry tests the first iteration, the body's end tests the next,
/// so each iteration takes one branch.
fn codegen_for(fx: &mut FunctionCx, inst: lir::Inst) -> Result<(), CodegenError> {
    let f = fx.f;
    let data = &f.insts[inst];
    let (&[body, exit], [region]) = (&fx.blocks[inst][..], &data.regions[..]) else {
        return Err(CodegenError::InvalidIr(format!("{inst}: a for needs one region")));
    };
    if data.args.len() < 3
        || region.args.len() != data.args.len() - 2
        || data.results.len() != data.args.len() - 3
    {
        return Err(CodegenError::InvalidIr(format!(
            "{inst}: operands, region arguments and results of a for do not match"
        )));
    }
    let d = f.ty(data.args[0]).dtype();
    let (lb, ub, step) = (fx.scalar(data.args[0])?, fx.scalar(data.args[1])?, fx.scalar(data.args[2])?);
    let outer = reload_broadcast_scalars(fx, inst);
    let carried_tys: Vec<Ty> = data.results.iter().map(|&r| f.ty(r)).collect();
    let init = data.args[3..].iter().map(|&a| fx.val(a)).collect::<Result<Vec<_>, _>>()?;
    let wide = fx.wide_loops.contains(&inst);
    let srcloc = fx.bcx.srcloc();
    if wide {
        fx.bcx.set_srcloc(crate::wide::srcloc(fx.wide_emitted));
        fx.wide_emitted += 1;
    }
    let init = if wide {
        crate::wide::broadcast_constants(fx, inst)?;
        let mut out = Vec::new();
        for ((&ty, v), &a) in carried_tys.iter().zip(&init).zip(&data.args[3..]) {
            match crate::wide::enter_splat(fx, ty, a)? {
                Some(parts) => out.extend(parts),
                // `wide::eligible`: only tiles that start as splats are carried.
                None if crate::wide::wide_tile(ty, fx.wide_per) => {
                    return Err(CodegenError::InvalidIr(format!(
                        "{inst}: a wide loop carries {a}, not a splat"
                    )));
                }
                None => out.extend(value::to_canonical(&mut fx.bcx, ty, v)?),
            }
        }
        out
    } else {
        canonical_args(fx, &carried_tys, &init)?
    };
    let first = loop_continues(fx, d, lb, ub, step);
    // Indices of at most 32 bits run in i64 (see `induction.rs`).
    let stepping = induction::stepping(fx.f, &fx.ranges, inst);
    let (lb_body, ub64) = match stepping {
        Stepping::Checked => (lb, None),
        _ => (extend_to_i64(fx, d, lb), Some(extend_to_i64(fx, d, ub))),
    };
    // The bound enters the loop as a block parameter of its own, passed around unchanged:
    // regalloc2 otherwise splits the long live range of a bound computed once for several
    // loops (the seed forward's first two) and keeps it in a stack slot inside them, with a
    // reload, a store and a jump more every iteration. A parameter is a value of the loop
    // alone. Cranelift removes a parameter that every edge passes unchanged before its
    // egraph pass, which is why the back edge passes `bor(p, p)`: the egraph folds it to `p`
    // after, leaving no move.
    if ub64.is_some() {
        fx.bcx.append_block_param(body, types::I64);
    }
    let entry_vals = [&[lb_body][..], &init, ub64.as_slice()].concat();
    // A loop with streaming stores runs in two copies, chosen once on entry by its
    // `stream_ok` flag: `body` streams, `cached` does not.
    let versions = match region.insts.iter().find_map(|&i| f.insts[i].stream_flag()) {
        Some(flag) => {
            let flag = fx.scalar(flag)?;
            let tys: Vec<Type> =
                fx.bcx.block_params(body).iter().map(|&p| fx.bcx.func.dfg.value_type(p)).collect();
            let dispatch = fx.bcx.create_block();
            let cached = fx.bcx.create_block();
            for &t in &tys {
                fx.bcx.append_block_param(dispatch, t);
                fx.bcx.append_block_param(cached, t);
            }
            Some((flag, dispatch, cached))
        }
        None => None,
    };
    let enter = versions.map_or(body, |(_, dispatch, _)| dispatch);
    if !hoist::emit_loop_entry(fx, inst, d, (lb, ub), first, (enter, &entry_vals), (exit, &init))? {
        fx.bcx.ins().brif(first, enter, &block_args(&entry_vals), exit, &block_args(&init));
    }
    if inert(fx, inst) {
        // Its checks, if any, were made in front of it: nothing is left to run.
        fx.bcx.switch_to_block(body);
        fx.bcx.ins().jump(exit, &[]);
    } else if let Some((flag, dispatch, cached)) = versions {
        fx.bcx.switch_to_block(dispatch);
        let params = block_args(fx.bcx.block_params(dispatch));
        // A wide loop's non-temporal stores write 32 bytes, which must be aligned: a row
        // whose first streamed store is not (16 bytes past, as `stream_ok` allows) takes
        // the cached copy. (The `stream` pass streams rows of 32-byte tiles whole only
        // from a 32-byte boundary; rows 16 bytes past one stream their whole lines.)
        let flag = if wide {
            let aligned = crate::wide::streams_aligned(fx, inst, lb)?;
            fx.bcx.ins().band(flag, aligned)
        } else {
            flag
        };
        fx.bcx.ins().brif(flag, body, &params, cached, &params);
        fx.streaming = true;
        let streamed = for_body(fx, inst, body, exit, (stepping, ub64));
        fx.streaming = false;
        streamed?;
        for_body(fx, inst, cached, exit, (stepping, ub64))?;
    } else {
        for_body(fx, inst, body, exit, (stepping, ub64))?;
    }

    fx.bcx.switch_to_block(exit);
    for (v, c) in outer {
        fx.values[v] = c;
    }
    if wide {
        fx.wide_consts.clear();
        fx.wide_scalars.clear();
        let vals = wide_vals(fx, exit, 0, &carried_tys)?;
        for (&r, v) in data.results.iter().zip(vals) {
            fx.def(r, v);
        }
        let sums = std::mem::take(&mut fx.exit_sums);
        let mut leaving: Vec<lir::Value> = data.results.clone();
        for &s in &sums {
            crate::wide::codegen_inst(fx, s)?;
            let d = &f.insts[s];
            leaving.retain(|v| !d.args.contains(v));
            leaving.push(d.results[0]);
            fx.folded.insert(s);
        }
        for v in leaving {
            let ty = f.ty(v);
            if let CVal::Tile(t) = fx.val(v)?
                && crate::wide::wide_tile(ty, fx.wide_per)
            {
                let flat = crate::wide::leave(fx, ty, &t.parts);
                fx.def(v, value::from_flat(ty, &flat)?);
            }
        }
        fx.bcx.set_srcloc(srcloc);
    } else {
        for (&r, v) in data.results.iter().zip(block_vals(fx, exit, 0, &carried_tys)?) {
            fx.def(r, v);
        }
    }
    Ok(())
}

/// Whether loop `l` has no effect once the checks hoisted in front of it are made: it
/// carries nothing (so its values serve only its own body) and its body has only pure
/// instructions, non-volatile loads and stores that only check their bounds
/// (`check_only`), each access checked already or in code without checks: what lnc-tile's
/// `defer` leaves where it moved a store from, the loads of the stored value included.
fn inert(fx: &FunctionCx, l: lir::Inst) -> bool {
    let f = fx.f;
    let checked = |i: lir::Inst| !fx.opts.checked || fx.prechecked.contains(&i);
    f.insts[l].results.is_empty()
        && f.insts[l].regions[0]
            .insts
            .iter()
            .any(|&i| matches!(f.insts[i].opcode, Opcode::Store { check_only: true, .. }))
        && f.insts[l].regions[0].insts.iter().all(|&i| {
            let d = &f.insts[i];
            match d.opcode {
                Opcode::Store { check_only: true, .. } | Opcode::Load { volatile: false, .. } => checked(i),
                Opcode::Yield => true,
                op => op.is_pure() && d.regions.is_empty(),
            }
        })
}

/// The carried values of a wide loop (module `wide`) from the parameters of `block`
/// after the first `skip`: wide parts for its tiles.
fn wide_vals(fx: &FunctionCx, block: Block, skip: usize, tys: &[Ty]) -> Result<Vec<CVal>, CodegenError> {
    let params = fx.bcx.block_params(block)[skip..].to_vec();
    let mut out = Vec::with_capacity(tys.len());
    let mut at = 0;
    for &ty in tys {
        let n = crate::wide::carried_types(ty, fx.wide_per)?.len();
        let part = &params[at..at + n];
        out.push(if crate::wide::wide_tile(ty, fx.wide_per) {
            CVal::Tile(value::Tile { per: fx.wide_per, parts: part.to_vec() })
        } else {
            value::from_flat(ty, part)?
        });
        at += n;
    }
    Ok(out)
}

/// The block arguments carrying `vals` around a wide loop: wide parts for its tiles.
fn wide_args(fx: &mut FunctionCx, tys: &[Ty], vals: &[CVal]) -> Result<Vec<Value>, CodegenError> {
    let mut out = Vec::new();
    for (&ty, v) in tys.iter().zip(vals) {
        match v {
            CVal::Tile(t) if t.per == fx.wide_per => out.extend(t.parts.iter().copied()),
            _ => out.extend(value::to_canonical(&mut fx.bcx, ty, v)?),
        }
    }
    Ok(out)
}

/// The scalars that loop `inst` broadcasts into tiles: operands of its `splat`s and scalar
/// operands of its tile arithmetic, defined before the loop.
fn broadcast_operands(f: &lir::Function, inst: lir::Inst) -> Vec<lir::Value> {
    let mut inside = HashSet::new();
    let mut wanted = Vec::new();
    let mut stack = vec![&f.insts[inst].regions[0]];
    while let Some(region) = stack.pop() {
        inside.extend(region.args.iter().copied());
        for &i in &region.insts {
            let data = &f.insts[i];
            inside.extend(data.results.iter().copied());
            stack.extend(data.regions.iter());
            let broadcasts = match data.opcode {
                Opcode::Splat => true,
                Opcode::Binary(_) | Opcode::Cmp(_) | Opcode::Select | Opcode::Unary(_) => {
                    data.results.iter().any(|&r| matches!(f.ty(r), Ty::Tile(..)))
                }
                _ => false,
            };
            if broadcasts {
                wanted.extend(data.args.iter().copied().filter(|&a| matches!(f.ty(a), Ty::Scalar(_))));
            }
        }
    }
    let mut seen = HashSet::new();
    wanted.retain(|v| !inside.contains(v) && seen.insert(*v));
    wanted
}

/// Whether `inst` is translated to a call of a runtime helper (which clobbers every vector
/// register): row conversions, prints, and float math without a Cranelift instruction.
fn calls_helper(f: &lir::Function, inst: lir::Inst) -> bool {
    let data = &f.insts[inst];
    let float = || data.results.first().is_some_and(|&r| f.ty(r).dtype().is_float());
    match data.opcode {
        Opcode::RowLoad { .. } | Opcode::RowStore { .. } | Opcode::Print(_) => true,
        Opcode::Binary(op) => matches!(op, lir::BinOp::Rem | lir::BinOp::Pow) && float(),
        Opcode::Unary(op) => {
            let d = data.results.first().map(|&r| f.ty(r).dtype());
            let computed = crate::vmath::computes(op) && d != Some(DType::F64);
            crate::helpers::unary(op, false).is_some() && float() && !computed
        }
        _ => false,
    }
}

/// For each loop, the scalars it broadcasts ([`broadcast_operands`]), when the function
/// calls helpers (see [`reload_broadcast_scalars`]); empty otherwise.
fn loop_broadcasts(f: &lir::Function) -> HashMap<lir::Inst, Vec<lir::Value>> {
    let insts = f.live_insts();
    if !insts.iter().any(|&i| calls_helper(f, i)) {
        return HashMap::new();
    }
    insts
        .into_iter()
        .filter(|&i| f.insts[i].opcode == Opcode::For)
        .map(|i| (i, broadcast_operands(f, i)))
        .collect()
}

/// Keeps a copy in a stack slot of each scalar of [`FunctionCx::rebroadcast`] as it is
/// defined, for [`reload_broadcast_scalars`].
fn save_broadcast_scalars(fx: &mut FunctionCx, inst: lir::Inst) {
    for &r in &fx.f.insts[inst].results {
        if !fx.rebroadcast.contains(&r) {
            continue;
        }
        let Some(CVal::Scalar(s)) = fx.values[r] else { continue };
        let ty = fx.bcx.func.dfg.value_type(s);
        if ty.is_vector() {
            continue;
        }
        let slot = fx.bcx.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            ty.bytes(),
            ty.bytes().trailing_zeros() as u8,
        ));
        fx.bcx.ins().stack_store(types::I64, s, slot, 0);
        fx.saved.insert(r, (slot, fx.calls));
    }
}

/// Binds each scalar that loop `inst` broadcasts, and that a helper call may have come
/// between the definition of and this loop, to a fresh load of its saved copy; returns
/// the old bindings, restored after the loop (the loads do not dominate what follows a
/// loop inside an `if`).
///
/// Cranelift's egraph merges the broadcasts of one scalar in consecutive loops into one
/// vector defined in front of the first loop. Kept alive in between, that vector crosses
/// the helper calls between or inside loops (`row_load`, `row_store`, `exp`, …), which
/// clobber every vector register, and regalloc2 then keeps it in a stack slot inside the
/// next loop: a reload and a store every iteration (measured on the forward with fp16
/// `w` and `b`: 1.56× the time of fp32 for 1.09× the instructions). A load after the call
/// is a new value (no load is forwarded across a call), so each such loop broadcasts in
/// front of itself.
fn reload_broadcast_scalars(fx: &mut FunctionCx, inst: lir::Inst) -> Vec<(lir::Value, Option<CVal>)> {
    if fx.saved.is_empty() {
        return Vec::new();
    }
    let mut old = Vec::new();
    for &v in fx.broadcasts.get(&inst).into_iter().flatten() {
        let (Some(&(slot, calls)), Some(CVal::Scalar(s))) = (fx.saved.get(&v), &fx.values[v]) else {
            continue;
        };
        if calls == fx.calls {
            continue;
        }
        let ty = fx.bcx.func.dfg.value_type(*s);
        let reloaded = fx.bcx.ins().stack_load(types::I64, ty, slot, 0);
        old.push((v, fx.values[v].replace(CVal::Scalar(reloaded))));
    }
    old
}

/// Emits the body of `for` instruction `inst` in block `body`, which loops to itself and
/// leaves to `exit`.
fn for_body(
    fx: &mut FunctionCx,
    inst: lir::Inst,
    body: Block,
    exit: Block,
    (stepping, ub64): (Stepping, Option<Value>),
) -> Result<(), CodegenError> {
    let f = fx.f;
    let data = &f.insts[inst];
    let region = &data.regions[0];
    let d = f.ty(data.args[0]).dtype();
    let (ub, step) = (fx.scalar(data.args[1])?, fx.scalar(data.args[2])?);
    let carried_tys: Vec<Ty> = data.results.iter().map(|&r| f.ty(r)).collect();
    fx.bcx.switch_to_block(body);
    let param = fx.bcx.block_params(body)[0];
    let narrow = value::scalar_type(d)?;
    let iv = match stepping {
        Stepping::Wide(_) => {
            fx.wide.insert(region.args[0], param);
            fx.bcx.ins().ireduce(narrow, param)
        }
        Stepping::Extended => fx.bcx.ins().ireduce(narrow, param),
        Stepping::Checked => param,
    };
    let wide = fx.wide_loops.contains(&inst);
    let mut args = vec![CVal::Scalar(iv)];
    args.extend(if wide {
        wide_vals(fx, body, 1, &carried_tys)?
    } else {
        block_vals(fx, body, 1, &carried_tys)?
    });
    fx.in_wide = wide;
    let next = codegen_region(fx, region, &args);
    fx.in_wide = false;
    let next = yielded(next?, "a for body")?;
    let next =
        if wide { wide_args(fx, &carried_tys, &next)? } else { canonical_args(fx, &carried_tys, &next)? };
    // The bound's own parameter (`codegen_for`), last.
    let ub64 = ub64.and_then(|_| fx.bcx.block_params(body).last().copied());
    let (iv_next, again) = match (stepping, ub64) {
        (Stepping::Wide(s), Some(ub64)) => {
            let next = fx.bcx.ins().iadd_imm_s(param, s);
            (next, fx.bcx.ins().icmp(IntCC::SignedLessThan, next, ub64))
        }
        (Stepping::Extended, Some(ub64)) => {
            // Both operands fit in 33 bits: the sum cannot wrap.
            let step64 = extend_to_i64(fx, d, step);
            let next = fx.bcx.ins().iadd(param, step64);
            (next, loop_continues(fx, DType::I64, next, ub64, step64))
        }
        _ => {
            // The index has not reached `ub` (the entry or the previous turn checked it),
            // so the distance left is exact as an unsigned number, and the step past the
            // bound is the one not shorter than it: no sum that could wrap is compared.
            let next = fx.bcx.ins().iadd(iv, step);
            let left_up = fx.bcx.ins().isub(ub, iv);
            let again_up = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThan, left_up, step);
            let again = if d.is_signed() {
                let up = fx.bcx.ins().icmp_imm_s(IntCC::SignedGreaterThan, step, 0);
                let left_down = fx.bcx.ins().isub(iv, ub);
                let back = fx.bcx.ins().ineg(step);
                let again_down = fx.bcx.ins().icmp(IntCC::UnsignedGreaterThan, left_down, back);
                fx.bcx.ins().select(up, again_up, again_down)
            } else {
                again_up
            };
            (next, again)
        }
    };
    let kept = ub64.map(|u| fx.bcx.ins().bor(u, u));
    let body_args = block_args(&[&[iv_next][..], &next, kept.as_slice()].concat());
    fx.bcx.ins().brif(again, body, &body_args, exit, &block_args(&next));
    Ok(())
}

/// `stream_ok`: the address is 16-byte aligned and `count` elements of `size` bytes per
/// program over the whole grid reach the streaming threshold (counted in `f64`, which
/// cannot overflow).
fn stream_ok(fx: &mut FunctionCx, ptr: Value, count: Value, size: u32) -> Value {
    let threshold = fx.opts.stream_bytes;
    if threshold == u64::MAX {
        return fx.bcx.ins().iconst(types::I8, 0);
    }
    let low = fx.bcx.ins().band_imm_u(ptr, 15);
    let aligned = fx.bcx.ins().icmp_imm_u(IntCC::Equal, low, 0);
    let count = fx.bcx.ins().fcvt_from_sint(types::F64, count);
    let size = fx.bcx.ins().f64const(f64::from(size));
    let mut bytes = fx.bcx.ins().fmul(count, size);
    for axis in 0..3 {
        let n = fx.load_abi(types::I32, fx.abi[2], axis * 4);
        let n = fx.bcx.ins().fcvt_from_uint(types::F64, n);
        bytes = fx.bcx.ins().fmul(bytes, n);
    }
    let limit = fx.bcx.ins().f64const(threshold as f64);
    let large = fx.bcx.ins().fcmp(ir::condcodes::FloatCC::GreaterThanOrEqual, bytes, limit);
    fx.bcx.ins().band(aligned, large)
}

/// `line_gap`: elements of `size` bytes from `ptr` to the next 64-byte boundary, or -1
/// when `ptr` is not a multiple of `size`.
fn line_gap(fx: &mut FunctionCx, ptr: Value, size: u32) -> Value {
    let misaligned = fx.bcx.ins().band_imm_u(ptr, i64::from(size) - 1);
    let bytes = fx.bcx.ins().ineg(ptr);
    let bytes = fx.bcx.ins().band_imm_u(bytes, 63);
    let elems = fx.bcx.ins().ushr_imm_u(bytes, i64::from(size.trailing_zeros()));
    let elems = fx.bcx.ins().ireduce(types::I32, elems);
    let none = fx.bcx.ins().iconst(types::I32, -1);
    fx.bcx.ins().select(misaligned, none, elems)
}

fn codegen_while(fx: &mut FunctionCx, inst: lir::Inst) -> Result<(), CodegenError> {
    let f = fx.f;
    let data = &f.insts[inst];
    let (&[cond, body, exit], [before, after]) = (&fx.blocks[inst][..], &data.regions[..]) else {
        return Err(CodegenError::InvalidIr(format!("{inst}: a while needs two regions")));
    };
    let carried_tys: Vec<Ty> = before.args.iter().map(|&a| f.ty(a)).collect();
    let fwd_tys: Vec<Ty> = after.args.iter().map(|&a| f.ty(a)).collect();
    let init = data.args.iter().map(|&a| fx.val(a)).collect::<Result<Vec<_>, _>>()?;
    let init = canonical_args(fx, &carried_tys, &init)?;
    fx.bcx.ins().jump(cond, &block_args(&init));

    fx.bcx.switch_to_block(cond);
    let carried = block_vals(fx, cond, 0, &carried_tys)?;
    let Some(Exit::Condition(flag, fwd)) = codegen_region(fx, before, &carried)? else {
        return Err(CodegenError::InvalidIr(format!(
            "{inst}: the condition region of a while must end with `condition`"
        )));
    };
    let fwd = canonical_args(fx, &fwd_tys, &fwd)?;
    // The exit edge first, so the body follows it in reverse post-order (see
    // `memory::check_range` on Cranelift's LICM).
    let stop = fx.bcx.ins().icmp_imm_u(IntCC::Equal, flag, 0);
    fx.bcx.ins().brif(stop, exit, &block_args(&fwd), body, &block_args(&fwd));

    fx.bcx.switch_to_block(body);
    let fwd = block_vals(fx, body, 0, &fwd_tys)?;
    if let Some((loops, slot)) = &fx.waiting
        && loops.contains(&inst)
    {
        let slot = *slot;
        fx.give_up_after_fault(slot);
    }
    let next = yielded(codegen_region(fx, after, &fwd)?, "a while body")?;
    let next = canonical_args(fx, &carried_tys, &next)?;
    fx.bcx.ins().jump(cond, &block_args(&next));

    fx.bcx.switch_to_block(exit);
    let result_tys: Vec<Ty> = data.results.iter().map(|&r| f.ty(r)).collect();
    if result_tys != fwd_tys {
        return Err(CodegenError::InvalidIr(format!(
            "{inst}: the results of a while differ from its forwarded values"
        )));
    }
    for (&r, v) in data.results.iter().zip(block_vals(fx, exit, 0, &result_tys)?) {
        fx.def(r, v);
    }
    Ok(())
}

/// Whether the regions of `inst` use atomics or volatile loads: then a loop may be waiting
/// for another program.
fn uses_atomics(f: &lir::Function, inst: lir::Inst) -> bool {
    f.insts[inst].regions.iter().flat_map(|r| &r.insts).any(|&i| {
        matches!(
            f.insts[i].opcode,
            Opcode::Atomic { .. } | Opcode::AtomicCas { .. } | Opcode::Load { volatile: true, .. }
        ) || uses_atomics(f, i)
    })
}

fn codegen_if(fx: &mut FunctionCx, inst: lir::Inst) -> Result<(), CodegenError> {
    let f = fx.f;
    let data = &f.insts[inst];
    let &[then_block, else_block, merge] = &fx.blocks[inst][..] else {
        return Err(CodegenError::InvalidIr(format!("{inst}: blocks of an if")));
    };
    if data.args.len() != 1 || data.regions.is_empty() || data.regions.len() > 2 {
        return Err(CodegenError::InvalidIr(format!(
            "{inst}: an if takes one condition and one or two regions"
        )));
    }
    let result_tys: Vec<Ty> = data.results.iter().map(|&r| f.ty(r)).collect();
    let c = fx.scalar(data.args[0])?;
    fx.bcx.ins().brif(c, then_block, &[], else_block, &[]);
    let empty = lir::Region::default();
    for (block, region) in
        [(then_block, &data.regions[0]), (else_block, data.regions.get(1).unwrap_or(&empty))]
    {
        fx.bcx.switch_to_block(block);
        let vals = yielded(codegen_region(fx, region, &[])?, "an if branch")?;
        let vals = canonical_args(fx, &result_tys, &vals)?;
        fx.bcx.ins().jump(merge, &block_args(&vals));
    }
    fx.bcx.switch_to_block(merge);
    for (&r, v) in data.results.iter().zip(block_vals(fx, merge, 0, &result_tys)?) {
        fx.def(r, v);
    }
    Ok(())
}

/// A false condition (any false lane of a tile) stops the program with `AssertFailed`.
fn codegen_assert(fx: &mut FunctionCx, site: u32, cond: lir::Value) -> Result<(), CodegenError> {
    let s = fx.site(site)?;
    let ok = match fx.val(cond)? {
        CVal::Scalar(c) => c,
        CVal::Tile(t) => num::all_true(&mut fx.bcx, &t),
    };
    let fail = fx.assert_block();
    let cont = fx.bcx.create_block();
    let site_v = fx.bcx.ins().iconst(types::I32, site as i64);
    let arg_v = fx.bcx.ins().iconst(types::I32, s.arg as i64);
    let failed = fx.bcx.ins().icmp_imm_u(IntCC::Equal, ok, 0);
    fx.bcx.ins().brif(failed, fail, &block_args(&[site_v, arg_v]), cont, &[]);
    fx.bcx.switch_to_block(cont);
    Ok(())
}

/// `device_print`: one helper call per lane, the line assembled and printed by the
/// helpers (see `helpers.rs`).
fn codegen_print(fx: &mut FunctionCx, prefix: u32, args: &[lir::Value]) -> Result<(), CodegenError> {
    let text =
        fx.f.strings
            .get(prefix as usize)
            .ok_or_else(|| CodegenError::InvalidIr(format!("string {prefix} is not in the string table")))?;
    let data = fx.module.declare_anonymous_data(false, false).map_err(crate::cranelift_error)?;
    let mut desc = DataDescription::new();
    desc.define(text.as_bytes().to_vec().into_boxed_slice());
    fx.module.define_data(data, &desc).map_err(crate::cranelift_error)?;
    let gv = fx.module.declare_data_in_func(data, fx.bcx.func);
    let ptr = fx.bcx.ins().symbol_value(types::I64, gv);
    let len = fx.bcx.ins().iconst(types::I64, text.len() as i64);
    // The helper reads the current pid from memory: this program's, not the call's first.
    let slot = fx.bcx.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 12, 2));
    for (axis, p) in fx.pid.into_iter().enumerate() {
        fx.bcx.ins().stack_store(types::I64, p, slot, axis as i32 * 4);
    }
    let pid = fx.bcx.ins().stack_addr(types::I64, slot, 0);
    fx.call_helper("lnc_print_begin", &[types::I64; 3], &[], &[pid, ptr, len])?;
    let sep = |fx: &mut FunctionCx, kind: i64| {
        let k = fx.bcx.ins().iconst(types::I32, kind);
        fx.call_helper("lnc_print_sep", &[types::I32], &[], &[k]).map(drop)
    };
    for &a in args {
        let ty = fx.f.ty(a);
        let d = ty.dtype();
        let lanes = match fx.val(a)? {
            CVal::Scalar(s) => vec![s],
            CVal::Tile(t) => value::lanes(&mut fx.bcx, d, &t),
        };
        sep(fx, if ty.is_tile() { 1 } else { 0 })?;
        for (k, lane) in lanes.into_iter().enumerate() {
            if k > 0 {
                sep(fx, 2)?;
            }
            let (name, v) = match ty {
                Ty::Ptr(_) => ("lnc_print_uint", lane),
                _ if d.is_float() => ("lnc_print_float", num::float_to_f64(&mut fx.bcx, d, lane)),
                _ if d.is_signed() => ("lnc_print_int", num::int_to_i64(&mut fx.bcx, d, lane)),
                _ => ("lnc_print_uint", num::int_to_i64(&mut fx.bcx, d, lane)),
            };
            let param = if name == "lnc_print_float" { types::F64 } else { types::I64 };
            fx.call_helper(name, &[param], &[], &[v])?;
        }
        if ty.is_tile() {
            sep(fx, 3)?;
        }
    }
    fx.call_helper("lnc_print_end", &[], &[], &[])?;
    Ok(())
}
