//! The decoders kcrash is built with, and the session as the [`Context`] they find their logs
//! in. A decoder crate under `plugins/` joins by one line of [`DECODERS`]; its `command()` is
//! then a session command (`commands::events`), and `plugins` lists it.

use std::sync::Arc;

use dumpfmt::{AddressSpace, Dump};
use kcrash_plugin::{Context, Decoder, Memory, Symbol};
use symbols::Image;

use crate::session::Session;

/// Every decoder, in the order `plugins` lists them.
pub static DECODERS: &[&dyn Decoder] = &[&kcrash_qnx::Qnx];

/// The decoder whose command is `name`.
pub fn by_command(name: &str) -> Option<&'static dyn Decoder> {
    DECODERS.iter().copied().find(|d| d.command() == name)
}

/// `decoder`'s place in [`DECODERS`] (the session keeps each one's log by it).
pub fn index_of(decoder: &dyn Decoder) -> usize {
    DECODERS
        .iter()
        .position(|d| d.command() == decoder.command())
        .unwrap_or(usize::MAX)
}

impl<'d> Context<'d> for Session<'d> {
    fn memory(&self) -> &dyn Memory {
        self
    }

    fn symbol(&self, name: &str) -> Option<Symbol> {
        let images = self.images();
        let (_, sym) = images.set.symbol(name)?;
        Some(Symbol {
            address: sym.address,
            size: sym.size,
        })
    }

    fn images(&self) -> Vec<Arc<Image>> {
        Session::images(self).set.images().to_vec()
    }

    fn dump(&self) -> &'d Dump {
        self.dump
    }

    fn space(&self) -> &AddressSpace<'d> {
        self.base_space()
    }
}
