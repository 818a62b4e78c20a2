//! The session as the [`Context`] decoders find their logs in.

use std::sync::Arc;

use dumpfmt::{AddressSpace, Dump};
use kcrash_plugin::{Context, Memory, Symbol};
use symbols::Image;

use super::Session;

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
