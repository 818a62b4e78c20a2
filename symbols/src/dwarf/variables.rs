//! A global variable's DIE: its names, type and static address, following
//! `DW_AT_specification` from a definition to its declaration.

use gimli::constants as dw;
use gimli::SectionId;

use super::{DwarfFile, MAX_CHAIN};
use crate::bytes::Reader;
use crate::error::Result;
use crate::types::TypeId;
use crate::units::ParsedUnit;

/// A global variable as DWARF describes it. Addresses are link-time here; `Image` adds the bias.
#[derive(Debug)]
pub(crate) struct RawVariable {
    pub(crate) name: Option<String>,
    pub(crate) linkage_name: Option<String>,
    pub(crate) address: Option<u64>,
    pub(crate) ty: Option<TypeId>,
}

impl DwarfFile {
    pub(super) fn read_variable(&self, die: u64) -> Result<RawVariable> {
        let mut variable = RawVariable {
            name: None,
            linkage_name: None,
            address: None,
            ty: None,
        };
        // A definition may carry only its location and point to its declaration for the rest.
        let mut next = Some(die);
        for _ in 0..MAX_CHAIN {
            let Some(offset) = next.take() else {
                return Ok(variable);
            };
            let (unit, in_unit) = self.unit_of(offset)?;
            let entry = unit.unit.entry(in_unit).map_err(self.gimli_error(offset))?;
            let mut attrs = entry.attrs();
            while let Some(attr) = attrs.next().map_err(self.gimli_error(offset))? {
                match attr.name() {
                    dw::DW_AT_name if variable.name.is_none() => {
                        variable.name = self.string(&unit, attr.value())
                    }
                    dw::DW_AT_linkage_name | dw::DW_AT_MIPS_linkage_name
                        if variable.linkage_name.is_none() =>
                    {
                        variable.linkage_name = self.string(&unit, attr.value())
                    }
                    dw::DW_AT_type if variable.ty.is_none() => {
                        variable.ty = self.reference(&unit, offset, attr.value())?
                    }
                    dw::DW_AT_location if variable.address.is_none() => {
                        if let Some(expression) = attr.exprloc_value() {
                            variable.address = self.static_address(&unit, offset, expression)?;
                        }
                    }
                    dw::DW_AT_specification | dw::DW_AT_abstract_origin => {
                        next = self.reference(&unit, offset, attr.value())?.map(|t| t.0)
                    }
                    _ => {}
                }
            }
        }
        Err(self.malformed(die, "DW_AT_specification chain does not end"))
    }

    /// The address a location expression gives when it is just an address (`DW_OP_addr`,
    /// `DW_OP_addrx`); `None` for thread-local and computed locations, and for an address in a
    /// section that is not loaded (a module's `__initdata` after initialisation).
    fn static_address(
        &self,
        unit: &ParsedUnit,
        die: u64,
        expression: gimli::Expression<Reader>,
    ) -> Result<Option<u64>> {
        use gimli::{Reader as _, Section as _};
        let start = expression.0.offset_from(self.dwarf.debug_info.reader());
        let mut ops = expression.operations(unit.unit.encoding());
        let first = ops.next().map_err(self.gimli_error(die))?;
        // Where the address was read, to ask whether it refers to a section not loaded.
        let (address, section, at) = match first {
            // The address follows the one-byte opcode.
            Some(gimli::Operation::Address { address }) => {
                (address, SectionId::DebugInfo, start.wrapping_add(1))
            }
            Some(gimli::Operation::AddressIndex { index }) => {
                let address = self
                    .dwarf
                    .address(&unit.unit, index)
                    .map_err(self.gimli_error(die))?;
                let size = usize::from(unit.unit.encoding().address_size);
                let at = unit
                    .unit
                    .addr_base
                    .0
                    .wrapping_add(index.0.wrapping_mul(size));
                (address, SectionId::DebugAddr, at)
            }
            _ => return Ok(None),
        };
        // Anything after the address (a TLS operator, arithmetic) makes it not a plain address.
        if ops.next().map_err(self.gimli_error(die))?.is_some() {
            return Ok(None);
        }
        if self.sections.relocations(section)?.unloaded_at(at) {
            return Ok(None);
        }
        Ok(Some(address))
    }
}
