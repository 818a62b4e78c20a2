//! Finding the KLog in a session: by the image's DWARF (in the image, or in the first loaded
//! module that has `KLogs`); else by the descriptor at its `klogDescriptor` symbol; else by
//! scanning the dump's memory for the descriptor.

use dumpfmt::translate::x86_64::X86_64;
use dumpfmt::translate::{AddressSpace, LinearMap, Source};
use dumpfmt::Dump;
use kcrash_plugin::{Context, Missing};
use std::sync::Arc;

use crate::descriptor::{self, Described, LayoutSource};
use crate::layout::{KLogLayout, LayoutError};

pub fn find_layout<'d>(cx: &dyn Context<'d>) -> Result<FoundLayout<'d>, Missing> {
    let all = cx.images();
    let image = all
        .iter()
        .find(|i| i.symbol("KLogs").is_some() || i.symbol(DESCRIPTOR).is_some());
    let Some(image) = image else {
        let mut notes = Vec::new();
        if let Some(first) = all.first() {
            notes.push(format!(
                "{} has neither KLogs nor {DESCRIPTOR}: the KLog descriptor was looked for \
                 in the dump's memory",
                first.path().display()
            ));
        }
        return scan(cx, notes);
    };
    let mut notes = Vec::new();
    let described = image.symbol(DESCRIPTOR).map(|sym| {
        let read = |at, buf: &mut [u8]| cx.memory().read(at, buf).map_err(|e| e.to_string());
        (sym.address, descriptor::read(sym.address, &read))
    });
    if image.debug_path().is_some() && image.symbol("KLogs").is_some() {
        // symbols' errors name the file themselves.
        let layout = KLogLayout::from_image(image).map_err(|e| match e {
            LayoutError::Symbols(e) => Missing::Refused(e.to_string()),
            other => Missing::Refused(format!("{}: {other}", image.path().display())),
        })?;
        match described {
            Some((_, Ok(d))) => {
                let differ = descriptor::disagreement(&layout, &descriptor::layout(&d));
                notes.push(if differ.is_empty() {
                    "the KLog descriptor agrees with DWARF".into()
                } else {
                    format!(
                        "the KLog descriptor disagrees with DWARF, which is used: {}",
                        differ.join("; ")
                    )
                });
            }
            Some((_, Err(refused))) => notes.push(format!("{refused}; DWARF is used")),
            None => {}
        }
        return Ok(FoundLayout {
            layout,
            source: LayoutSource::Dwarf,
            notes,
            space: None,
        });
    }
    match described {
        Some((addr, Ok(d))) => Ok(FoundLayout {
            layout: descriptor::layout(&d),
            source: LayoutSource::Symbol { addr },
            notes,
            space: None,
        }),
        Some((_, Err(refused))) => Err(Missing::Refused(format!(
            "{} has no DWARF for KLogs, and its {refused}",
            image.path().display()
        ))),
        None => {
            notes.push(format!(
                "{} has no DWARF debug information and no {DESCRIPTOR} symbol: the KLog \
                 descriptor was looked for in the dump's memory",
                image.path().display()
            ));
            scan(cx, notes)
        }
    }
}

/// Scans the dump's memory for the descriptor. A kernel dump's candidates are physical: the
/// one chosen must be where the dump's own translations put its `self` address, or, when
/// they cannot translate it, it gives them — its page-table root, else the linear map that
/// puts its `self` address where it was found.
fn scan<'d>(cx: &dyn Context<'d>, mut notes: Vec<String>) -> Result<FoundLayout<'d>, Missing> {
    let dump = cx.dump();
    if dump.is_live() {
        return Err(Missing::Absent(
            "no KLogs: give the .ko of the module that holds it (kcrash klogtest.ko), or the \
             kernel's vmlinux with DWARF (a running kernel's memory is not scanned)"
                .into(),
        ));
    }
    // Process cores, and kernel dumps that give only virtual addresses, are searched by
    // virtual address: a candidate is then where it says it is, or it is a copy.
    let process = dump.searched_by_virtual_address();
    let read = |at, buf: &mut [u8]| {
        if process {
            cx.memory().read(at, buf).map_err(|e| e.to_string())
        } else {
            dump.read_phys(at, buf).map_err(|e| e.to_string())
        }
    };
    let (found, searched) = descriptor::scan(dump, |at| descriptor::read(at, &read));
    let mut valid = Vec::new();
    for (at, result) in found {
        match result {
            Ok(d) => match place(cx, at, &d, process) {
                Ok(space) => valid.push((at, d, space)),
                Err(why) => notes.push(format!("KLog descriptor at {at:#x}: {why}")),
            },
            Err(refused) => notes.push(refused.to_string()),
        }
    }
    let what = if process { "" } else { "physical " };
    if valid.len() > 1 {
        let at: Vec<String> = valid
            .iter()
            .map(|(a, ..)| format!("{what}{a:#x}"))
            .collect();
        return Err(Missing::Refused(format!(
            "{} KLog descriptors in the dump's memory, at {}: kcrash trusts none of them; \
             give the image with DWARF",
            valid.len(),
            at.join(", ")
        )));
    }
    let Some((at, d, space)) = valid.pop() else {
        let refused = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        return Err(Missing::Absent(format!(
            "no usable KLog descriptor in the dump's memory ({} MiB searched{}){refused}; \
             give the kernel image with DWARF or its {DESCRIPTOR} symbol",
            searched.bytes >> 20,
            if searched.unreadable > 0 {
                format!(", {} MiB unreadable", searched.unreadable >> 20)
            } else {
                String::new()
            }
        )));
    };
    if let Some((_, why)) = &space {
        notes.push(why.clone());
    }
    Ok(FoundLayout {
        layout: descriptor::layout(&d),
        source: LayoutSource::Scan {
            found: at,
            virtual_addresses: process,
        },
        notes,
        space: space.map(|(s, _)| s),
    })
}

/// Checks that a descriptor found at `at` is the one its `self` address names, and says what
/// translations reading through its addresses needs beyond the dump's own (with a note).
fn place<'d>(
    cx: &dyn Context<'d>,
    at: u64,
    d: &Described,
    process: bool,
) -> Result<Option<(AddressSpace<'d>, String)>, String> {
    let this = d.parsed.this;
    if process {
        return if this == at {
            Ok(None)
        } else {
            Err(format!("it says it is at {this:#x}: a copy"))
        };
    }
    match cx.space().translate(this) {
        Ok(pa) if pa == at => return Ok(None),
        Ok(pa) => {
            return Err(format!(
                "it says it is at {this:#x}, which the dump's translations put at physical \
                 {pa:#x}: a copy"
            ))
        }
        Err(_) => {}
    }
    let mut space = AddressSpace::new(cx.dump());
    for source in cx.space().sources() {
        space.push(source.clone());
    }
    // The writer records CR3's value: an x86_64 table root.
    let x86_64 = cx.dump().machine() == dumpfmt::Machine::X86_64;
    if let Some(root) = d.parsed.page_table_root.filter(|_| x86_64) {
        space.push(Source::PageTables {
            walker: Arc::new(X86_64::new(false)),
            root,
        });
        if space.translate(this).is_ok_and(|pa| pa == at) {
            return Ok(Some((
                space,
                format!(
                    "virtual addresses translated through the page tables at physical \
                     {root:#x} the KLog descriptor records"
                ),
            )));
        }
        return Err(format!(
            "its page tables at {root:#x} do not map {this:#x} to where it was found"
        ));
    }
    let map = LinearMap {
        virt_start: this.wrapping_sub(at),
        len: phys_end(cx.dump()),
        phys_start: 0,
    };
    space.push(Source::Linear(map));
    Ok(Some((
        space,
        format!(
            "virtual addresses translated by the one linear map the KLog descriptor implies \
             (virtual {this:#x} is physical {at:#x}); memory mapped otherwise (vmalloc, \
             modules) is not readable"
        ),
    )))
}

/// The symbol of the KLog descriptor.
const DESCRIPTOR: &str = "klogDescriptor";

/// What [`find_layout`] found.
pub struct FoundLayout<'d> {
    pub layout: KLogLayout,
    pub source: LayoutSource,
    pub notes: Vec<String>,
    /// The dump's translations and the ones the descriptor implies, when it needed any.
    pub space: Option<AddressSpace<'d>>,
}

/// One past the highest physical address the dump holds.
fn phys_end(dump: &Dump) -> u64 {
    if let Some(range) = dump.raw_range() {
        return range.end;
    }
    match dump.kdump_header() {
        Some(h) => h.max_mapnr.saturating_mul(h.block_size),
        None => dump
            .segments()
            .iter()
            .map(|s| s.paddr.saturating_add(s.memsz))
            .max()
            .unwrap_or(0),
    }
}
