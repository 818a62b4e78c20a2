//! Address to function, file and line, with inlined frames, through addr2line. The addr2line
//! context is built on the first lookup over the full set of DWARF sections.

use std::sync::Mutex;

use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::sections::Sections;

/// One frame at an address: the innermost (inlined) function first, the function the code is
/// physically in last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// A lazily built addr2line context.
pub(crate) struct Lines {
    context: Mutex<Option<addr2line::Context<Reader>>>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lines")
    }
}

impl Lines {
    pub(crate) fn new() -> Lines {
        Lines {
            context: Mutex::new(None),
        }
    }

    /// The frames at link-time address `address`; empty when no unit covers it.
    pub(crate) fn frames(&self, sections: &Sections, address: u64) -> Result<Vec<Frame>> {
        // No unit's range [low, high) can hold the last address, and addr2line 0.25 overflows
        // computing `address + 1` for it.
        if address == u64::MAX {
            return Ok(Vec::new());
        }
        let path = &sections.file().path;
        let error = |source| Error::Lines {
            path: path.clone(),
            address,
            source,
        };
        let mut guard = self
            .context
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let context = match &mut *guard {
            Some(context) => context,
            empty => {
                let dwarf = sections.full_dwarf()?;
                empty.insert(addr2line::Context::from_dwarf(dwarf).map_err(error)?)
            }
        };
        let mut frames = Vec::new();
        let mut iter = context
            .find_frames(address)
            .skip_all_loads()
            .map_err(error)?;
        while let Some(frame) = iter.next().map_err(error)? {
            let function = match &frame.function {
                Some(name) => Some(name.demangle().map_err(error)?.into_owned()),
                None => None,
            };
            let location = frame.location.as_ref();
            frames.push(Frame {
                function,
                file: location.and_then(|l| l.file).map(str::to_owned),
                line: location.and_then(|l| l.line),
                column: location.and_then(|l| l.column),
            });
        }
        Ok(frames)
    }
}
