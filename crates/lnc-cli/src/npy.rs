//! `.npy` arrays as kernel buffers: read with their element type, written back after a launch.

use std::path::Path;

use lnc::{BufferArg, DType};
use lnc_diag::Diagnostic;

/// A host buffer holding an array's elements, 8-byte aligned so any dtype can live in it.
pub struct HostBuffer {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub len: usize,
    storage: Vec<u64>,
}

impl HostBuffer {
    /// A buffer of `len` elements of `dtype`, all bytes zero; an error when the memory
    /// cannot be had (the caller has checked that the size fits a `usize`).
    pub fn zeroed(dtype: DType, shape: Vec<u64>) -> Result<HostBuffer, String> {
        let len = shape.iter().product::<u64>() as usize;
        let bytes = len * dtype.size() as usize;
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(bytes.div_ceil(8))
            .map_err(|_| format!("cannot allocate {bytes} bytes for a buffer of shape {shape:?}"))?;
        storage.resize(bytes.div_ceil(8), 0u64);
        Ok(HostBuffer { dtype, shape, len, storage })
    }

    /// The elements' bytes.
    pub fn bytes(&self) -> &[u8] {
        let n = self.len * self.dtype.size() as usize;
        // SAFETY: `storage` holds at least `n` initialized bytes; u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.storage.as_ptr() as *const u8, n) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.dtype.size() as usize;
        // SAFETY: as in `bytes`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.storage.as_mut_ptr() as *mut u8, n) }
    }

    /// A writable launch argument over the whole buffer.
    pub fn arg(&mut self) -> BufferArg<'_> {
        let (len, dtype) = (self.len, self.dtype);
        // SAFETY: the storage is valid for `len` elements and borrowed mutably for the
        // lifetime of the returned argument.
        unsafe { BufferArg::from_raw(self.storage.as_mut_ptr() as *mut u8, len, dtype) }
    }
}

fn dtype_of(descr: &str) -> Option<DType> {
    // Only little-endian (or byte-sized) elements: that is what the kernels read.
    let (order, rest) = descr.split_at(1);
    if !matches!(order, "<" | "|" | "=") {
        return None;
    }
    Some(match rest {
        "b1" => DType::I1,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return None,
    })
}

/// The numpy name of an element type, for help lines (bf16 travels as uint16).
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::I1 => "bool",
        DType::BF16 => "uint16",
        d => d.tl_name(),
    }
}

/// What a kernel buffer can be read from, for help lines.
const READABLE: &str = "save it as bool, int8…int64, uint8…uint64, float16, float32 or float64 \
                        (uint16 for bfloat16), little-endian";

/// Reads an `.npy` file (C order, little-endian, numeric) into a host buffer. Errors have
/// no source location; they name the file and, where a fix is known, say it.
pub fn read(path: &Path) -> Result<HostBuffer, Diagnostic> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        let d = Diagnostic::error_nospan(format!("cannot read `{shown}`: {e}"));
        if e.kind() == std::io::ErrorKind::NotFound {
            d.with_help(
                "give the path of an existing .npy file (relative to the current directory), \
                 or a generated buffer such as `zeros:f32:1024`",
            )
        } else {
            d
        }
    })?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| {
        Diagnostic::error_nospan(format!("`{shown}` is not a valid .npy file: {e}"))
            .with_help("write it with `numpy.save`")
    })?;
    if npy.order() == npyz::Order::Fortran {
        return Err(Diagnostic::error_nospan(format!("`{shown}` is in Fortran order"))
            .with_help("save it in C order: `np.save(path, np.ascontiguousarray(a))`"));
    }
    let descr = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => {
            return Err(Diagnostic::error_nospan(format!(
                "`{shown}` has a structured dtype ({other:?}); lnc reads plain numeric arrays"
            ))
            .with_help(READABLE));
        }
    };
    let dtype = dtype_of(&descr).ok_or_else(|| {
        Diagnostic::error_nospan(format!(
            "`{shown}` has element type `{descr}`, which lnc cannot pass to a kernel"
        ))
        .with_help(READABLE)
    })?;
    let shape = npy.shape().to_vec();
    let short = || Diagnostic::error_nospan(format!("`{shown}` is shorter than its header says"));
    // Check the header's size against the file before allocating: a corrupt shape must not
    // overflow or ask for more memory than the file could fill.
    let size = shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d));
    if size.is_none_or(|n| n > bytes.len() as u64) {
        return Err(short());
    }
    let mut buf = HostBuffer::zeroed(dtype, shape).map_err(Diagnostic::error_nospan)?;
    // The data starts where the header says; bytes after the data are ignored, as NumPy
    // ignores them.
    let data = bytes.get(data_offset(&bytes).ok_or_else(short)?..).ok_or_else(short)?;
    let data = data.get(..buf.bytes().len()).ok_or_else(short)?;
    buf.bytes_mut().copy_from_slice(data);
    Ok(buf)
}

/// Where the data of an `.npy` file starts: after the magic string, the version, the
/// header's length (2 bytes in version 1, 4 in versions 2 and 3) and the header.
fn data_offset(bytes: &[u8]) -> Option<usize> {
    let (len, at) = match bytes.get(6)? {
        1 => (u16::from_le_bytes(bytes.get(8..10)?.try_into().ok()?) as usize, 10usize),
        _ => (u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize, 12),
    };
    len.checked_add(at)
}

macro_rules! write_as {
    ($buf:expr, $path:expr, $t:ty) => {{
        let size = std::mem::size_of::<$t>();
        let items: Vec<$t> = $buf
            .bytes()
            .chunks_exact(size)
            .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk of the element size")))
            .collect();
        write_items($path, &$buf.shape, items)
    }};
}

fn write_items<T: npyz::Serialize + npyz::AutoSerialize>(
    path: &Path,
    shape: &[u64],
    items: Vec<T>,
) -> Result<(), String> {
    use npyz::WriterBuilder;
    let shown = path.display();
    let file = std::fs::File::create(path).map_err(|e| format!("cannot create `{shown}`: {e}"))?;
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    w.extend(items).map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    w.finish().map_err(|e| format!("cannot write `{shown}`: {e}"))
}

/// Writes a host buffer as an `.npy` file with its shape and element type.
pub fn write(path: &Path, buf: &HostBuffer) -> Result<(), String> {
    match buf.dtype {
        DType::I1 => {
            write_items(path, &buf.shape, buf.bytes().iter().map(|&b| b != 0).collect::<Vec<bool>>())
        }
        DType::I8 => write_as!(buf, path, i8),
        DType::I16 => write_as!(buf, path, i16),
        DType::I32 => write_as!(buf, path, i32),
        DType::I64 => write_as!(buf, path, i64),
        DType::U8 => write_as!(buf, path, u8),
        DType::U16 => write_as!(buf, path, u16),
        DType::U32 => write_as!(buf, path, u32),
        DType::U64 => write_as!(buf, path, u64),
        DType::F16 => {
            let items: Vec<half::f16> =
                buf.bytes().chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]])).collect();
            write_items(path, &buf.shape, items)
        }
        // bf16 has no numpy dtype: it travels as its raw 16 bits in uint16 arrays.
        DType::BF16 => write_as!(buf, path, u16),
        DType::F32 => write_as!(buf, path, f32),
        DType::F64 => write_as!(buf, path, f64),
    }
}
