//! A [`KLogLayout`] from an image's DWARF: `KLogs`, `KLogBuffer` and the globals beside them, as
//! the compiler laid them out — a rustc kernel, a gcc kernel, whatever wrappers they use.

use symbols::{Image, TypeId, TypeKind};

use super::layout::{
    ArrayAt, Field, KLogFields, KLogLayout, LayoutError, Processors, ScalarArray, ScalarAt,
};

/// A global with its address and type.
fn variable(image: &Image, name: &'static str) -> Result<Option<(u64, TypeId)>, LayoutError> {
    Ok(image
        .variable(name)?
        .and_then(|v| Some((v.address?, v.ty?))))
}

/// An array variable (or a struct whose only member is the array, like klog-runtime's
/// `CacheAligned`): address, length and element size.
fn array(
    image: &Image,
    name: &'static str,
    addr: u64,
    ty: TypeId,
) -> Result<(ArrayAt, TypeId), LayoutError> {
    let mut addr = addr;
    let mut ty = image.value_type(ty)?;
    let t = image.type_(ty)?;
    if let TypeKind::Struct(members) = &t.kind {
        if let [only] = members.as_slice() {
            addr += only.offset;
            ty = image.value_type(only.ty.ok_or(LayoutError::NotAnArray(name))?)?;
        }
    }
    let TypeKind::Array(a) = &image.type_(ty)?.kind else {
        return Err(LayoutError::NotAnArray(name));
    };
    let (Some(element), Some(Some(len))) = (a.element, a.dims.first()) else {
        return Err(LayoutError::NotAnArray(name));
    };
    let stride = image
        .size_of(element)?
        .ok_or(LayoutError::NotAnArray(name))?;
    Ok((
        ArrayAt {
            addr,
            len: *len,
            stride,
        },
        element,
    ))
}

fn scalar(image: &Image, name: &'static str) -> Result<Option<ScalarAt>, LayoutError> {
    let Some((addr, ty)) = variable(image, name)? else {
        return Ok(None);
    };
    Ok(image.size_of(ty)?.map(|size| ScalarAt { addr, size }))
}

impl KLogLayout {
    /// Finds the KLog statics in `image`'s DWARF (addresses include the image's load bias).
    pub fn from_image(image: &Image) -> Result<KLogLayout, LayoutError> {
        let (addr, ty) = variable(image, "KLogs")?.ok_or(LayoutError::MissingVariable("KLogs"))?;
        let (klogs, element) = array(image, "KLogs", addr, ty)?;
        let klog = image.type_(image.value_type(element)?)?;
        let fields = KLogFields::from_lookup(|name| {
            let m = klog.member(name)?;
            let size = image.size_of(m.ty?).ok()??;
            Some(Field {
                offset: m.offset,
                size,
            })
        })?;
        let (baddr, bty) =
            variable(image, "KLogBuffer")?.ok_or(LayoutError::MissingVariable("KLogBuffer"))?;
        let (buffer, _) = array(image, "KLogBuffer", baddr, bty)?;
        let debug_flags = match variable(image, "DebugFlags")? {
            Some((a, t)) => Some(array(image, "DebugFlags", a, t)?.0),
            None => None,
        };
        let commits = match variable(image, "KLogCommits")? {
            Some((a, t)) => {
                let (array, element) = array(image, "KLogCommits", a, t)?;
                // Each counter is the first 8 bytes of its cache-line-sized slot.
                let size = image.size_of(element)?.map_or(8, |s| s.min(8));
                Some(ScalarArray { array, size })
            }
            None => None,
        };
        let descriptions = match variable(image, "KLogDescriptions")? {
            Some((a, t)) => Some(array(image, "KLogDescriptions", a, t)?.0),
            None => None,
        };
        Ok(KLogLayout {
            klogs,
            processors: scalar(image, "klogProcessors")?
                .map_or(Processors::Known(1), Processors::At),
            fields,
            buffer,
            debug_flags,
            klog_level: scalar(image, "klogLevel")?,
            clock_hz: scalar(image, "klogClockHz")?,
            commits,
            flags: scalar(image, "klogFlags")?,
            descriptions,
            names: Vec::new(),
        })
    }
}
