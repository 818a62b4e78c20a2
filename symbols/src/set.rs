//! Several images searched as one, as a debugger searches a kernel and its loaded modules: a
//! name in the first image that has it, an address in the image whose sections hold it.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::image::{Image, Search, Variable};
use crate::lines::Frame;
use crate::symtab::Symbol;
use crate::types::TypeId;

/// Images searched in the order they were added (put the kernel first, as crash and drgn
/// do, so that its names win over a module's static of the same name). The images are shared:
/// a caller that adds modules while others read can clone the set (cheaply) and swap it in.
#[derive(Debug, Default, Clone)]
pub struct ImageSet {
    images: Vec<Arc<Image>>,
    /// Every image's run-time address ranges as (start, end, image index), sorted by start.
    ranges: Vec<(u64, u64, usize)>,
}

impl ImageSet {
    pub fn new() -> ImageSet {
        ImageSet::default()
    }

    /// Adds `image`, searched after those already in the set; returns its index.
    pub fn push(&mut self, image: impl Into<Arc<Image>>) -> usize {
        let image = image.into();
        let index = self.images.len();
        self.ranges.extend(
            image
                .address_ranges()
                .filter(|range| !range.is_empty())
                .map(|range| (range.start, range.end, index)),
        );
        self.ranges.sort_unstable();
        self.images.push(image);
        index
    }

    /// The images, in search order.
    pub fn images(&self) -> &[Arc<Image>] {
        &self.images
    }

    pub fn get(&self, index: usize) -> Option<&Image> {
        self.images.get(index).map(|i| &**i)
    }

    /// The image whose sections hold run-time `address` (of overlapping ones, the one whose
    /// range starts nearest below it).
    pub fn image_at(&self, address: u64) -> Option<&Image> {
        let below = self
            .ranges
            .partition_point(|&(start, _, _)| start <= address);
        let &(_, _, index) = self
            .ranges
            .get(..below)?
            .iter()
            .rev()
            .find(|&&(_, end, _)| address < end)?;
        self.get(index)
    }

    /// The ELF symbol `name` in the first image that has it.
    pub fn symbol(&self, name: &str) -> Option<(&Image, Symbol)> {
        self.images
            .iter()
            .find_map(|image| Some((&**image, image.symbol(name)?)))
    }

    /// The ELF symbol containing run-time `address`, in the image that holds it, and the offset
    /// of `address` in it.
    pub fn symbolize(&self, address: u64) -> Option<(&Image, Symbol, u64)> {
        let image = self.image_at(address)?;
        let (symbol, offset) = image.symbolize(address)?;
        Some((image, symbol, offset))
    }

    /// The global variable `name` in the first image whose DWARF has it (see
    /// [`Image::variable`]). Images without DWARF are passed over; an image whose DWARF cannot
    /// be read does not hide a later one that has the name, but when no image has it, that
    /// image's error is returned (the name may have been there).
    ///
    /// Every image is first searched quickly ([`Search::Quick`]), then fully: a module's
    /// variable is found without indexing a kernel whose symbol table does not name it.
    pub fn variable(&self, name: &str) -> Result<Option<(&Image, Variable)>> {
        self.in_two_passes(|image, search| image.find_variable(name, search))
    }

    /// The type `name` in the first image whose DWARF has it (see [`Image::type_by_name`]);
    /// the [`TypeId`] is that image's. Errors as for [`ImageSet::variable`]. Searched in two
    /// passes, as variables are: a type the kernel's visited units do not define is taken
    /// from the first module that does, before the kernel's full index is built; modules are
    /// built against the kernel's headers, so a type both describe is the same type.
    pub fn type_by_name(&self, name: &str) -> Result<Option<(&Image, TypeId)>> {
        self.in_two_passes(|image, search| image.find_type(name, search))
    }

    fn in_two_passes<'a, T>(
        &'a self,
        find: impl Fn(&'a Image, Search) -> Result<Option<T>>,
    ) -> Result<Option<(&'a Image, T)>> {
        match self.first(|image| find(image, Search::Quick)) {
            Ok(Some(found)) => Ok(Some(found)),
            _ => self.first(|image| find(image, Search::Full)),
        }
    }

    /// Function, file and line at run-time `address`, from the image that holds it; empty when
    /// no image does.
    pub fn frames(&self, address: u64) -> Result<Vec<Frame>> {
        match self.image_at(address) {
            Some(image) => image.frames(address),
            None => Ok(Vec::new()),
        }
    }

    fn first<'a, T>(
        &'a self,
        find: impl Fn(&'a Image) -> Result<Option<T>>,
    ) -> Result<Option<(&'a Image, T)>> {
        let mut failure = None;
        for image in self.images.iter().map(|i| &**i) {
            match find(image) {
                Ok(Some(found)) => return Ok(Some((image, found))),
                Ok(None) | Err(Error::NoDebugInfo { .. }) => {}
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(None),
        }
    }
}
