//! The value printer over hostile DWARF: a real gcc-built image whose DWARF is edited so that a
//! struct holds an array of itself. ptype and whatis see the cycle; printing a value must end
//! too, in bounded memory, with the cut marked, never growing until the process aborts.

use std::path::Path;
use std::process::Command;

use kcrash::expr::text::Writer;
use kcrash::expr::value::{Options, Reader};
use kcrash::expr::{parse_expr, Evaluator};
use kcrash::memory::{Memory, Unreadable};
use kcrash_harness::tools;
use symbols::Image;

const PROGRAM: &str = "
struct inner { int a; int b; };
struct outer { int x; struct inner arr[2]; };
struct outer cyclic;
int main(void) { return cyclic.x; }
";

/// Memory of zeros everywhere: what matters here is the types.
struct Zeros;

impl Memory for Zeros {
    fn read(&self, _: u64, buf: &mut [u8]) -> Result<(), Unreadable> {
        buf.fill(0);
        Ok(())
    }
}

/// `readelf --debug-dump=info`'s line for a DIE: `<1><2d>: Abbrev Number: 3 (DW_TAG_...)`.
fn die_offset(line: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix('<')?;
    let (_, rest) = rest.split_once("><")?;
    let (offset, _) = rest.split_once('>')?;
    u64::from_str_radix(offset, 16).ok()
}

/// The image's bytes with the array type's element type pointed at `struct outer` itself.
fn with_array_of_itself(program: &Path) -> Vec<u8> {
    let dump = tools::output(
        Command::new("readelf")
            .arg("--debug-dump=info")
            .arg("-wi")
            .arg(program),
    );
    let mut cu = None;
    let mut current: Option<(u64, String)> = None;
    let mut outer = None;
    let mut inner = None;
    // (offset of the array type's DW_AT_type value, the type it names)
    let mut array_type = None;
    for line in dump.lines() {
        if let Some(at) = line.trim().strip_prefix("Compilation Unit @ offset ") {
            cu = u64::from_str_radix(at.trim_end_matches(':').trim_start_matches("0x"), 16).ok();
        }
        if line.contains("(DW_TAG_") {
            let tag = line.rsplit('(').next().unwrap().trim_end_matches(')');
            current = die_offset(line).map(|o| (o, tag.to_owned()));
            continue;
        }
        let Some((die, tag)) = &current else { continue };
        let attr = line.trim_start();
        if tag == "DW_TAG_structure_type" && attr.contains("DW_AT_name") {
            if attr.ends_with(": outer") {
                outer = Some(*die);
            } else if attr.ends_with(": inner") {
                inner = Some(*die);
            }
        }
        if tag == "DW_TAG_array_type" && attr.contains("DW_AT_type") && array_type.is_none() {
            let at = u64::from_str_radix(&attr[1..attr.find('>').unwrap()], 16).unwrap();
            let named = attr.rsplit("<0x").next().unwrap().trim_end_matches('>');
            array_type = Some((at, u64::from_str_radix(named, 16).unwrap()));
        }
    }
    let (cu, outer, inner, (at, named)) = (
        cu.expect("a unit"),
        outer.expect("struct outer"),
        inner.expect("struct inner"),
        array_type.expect("the array type"),
    );
    assert_eq!(named, inner, "the array is of struct inner");
    let bytes = std::fs::read(program).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let section = object::Object::section_by_name(&file, ".debug_info").unwrap();
    let (start, _) = object::ObjectSection::file_range(&section).unwrap();
    let at = (start + at) as usize;
    let mut patched = bytes.clone();
    // gcc writes type references as DW_FORM_ref4, relative to the unit.
    assert_eq!(
        u32::from_le_bytes(patched[at..at + 4].try_into().unwrap()) as u64,
        inner - cu,
        "DW_AT_type is a ref4 to struct inner"
    );
    patched[at..at + 4].copy_from_slice(&((outer - cu) as u32).to_le_bytes());
    patched
}

#[test]
fn a_struct_holding_an_array_of_itself_prints_in_bounded_time_and_memory() {
    let test = "a_struct_holding_an_array_of_itself_prints_in_bounded_time_and_memory";
    if !tools::available_for(test, &["gcc", "readelf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("cyclic.c");
    let program = dir.path().join("cyclic");
    std::fs::write(&source, PROGRAM).unwrap();
    let built = Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success(), "gcc");
    let image = Image::from_bytes("cyclic", with_array_of_itself(&program)).unwrap();
    let ev = Evaluator::new(&image, &Zeros);
    let value = ev.eval(&parse_expr("cyclic").unwrap()).unwrap();
    let opts = Options::default();
    let node = Reader::new(&ev, opts).read(&value).unwrap();
    let text = Writer { ev: &ev, opts }.top(&node).unwrap();
    assert!(
        text.contains("<elided: the value has more than 200000 parts>"),
        "the cut is marked: {}",
        &text[..text.len().min(300)]
    );
    // Bounded: each part prints in a few dozen bytes.
    assert!(text.len() < 64 << 20, "{} bytes of text", text.len());
}
