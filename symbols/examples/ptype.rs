//! `ptype FILE NAME [-s SECTION ADDRESS]...`: looks up global variable (or, failing that, type)
//! NAME in ELF FILE and prints its address and full type with member offsets, like gdb's
//! `ptype /o`. With `-s`, FILE is a relocatable object (a kernel module) whose sections are at
//! those addresses, as in gdb's `add-symbol-file FILE -s SECTION ADDRESS`. Also the program the
//! README's speed figures are measured with.

use std::io::{self, Write};
use std::process::ExitCode;

use symbols::{Image, SectionAddresses, TypeId, TypeKind};

type Failure = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!("usage: ptype FILE NAME [-s SECTION ADDRESS]...");
        ExitCode::from(2)
    };
    let (Some(file), Some(name)) = (args.first(), args.get(1)) else {
        return usage();
    };
    let mut sections = None;
    for triple in args.get(2..).unwrap_or_default().chunks(3) {
        let [flag, section, address] = triple else {
            return usage();
        };
        let hex = address.trim_start_matches("0x");
        let (Ok(address), "-s") = (u64::from_str_radix(hex, 16), flag.as_str()) else {
            return usage();
        };
        sections
            .get_or_insert_with(SectionAddresses::new)
            .insert(section.as_str(), address);
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let result = run(&mut out, file, name, sections.as_ref())
        .and_then(|found| Ok(out.flush().map(|()| found)?));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{name}: no such variable or type in {file}");
            ExitCode::FAILURE
        }
        // A closed pipe (`ptype ... | head`) is not worth a message.
        Err(error) if error.downcast_ref::<io::Error>().is_some() => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("ptype: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    out: &mut impl Write,
    file: &str,
    name: &str,
    sections: Option<&SectionAddresses>,
) -> Result<bool, Failure> {
    let image = match sections {
        Some(sections) => Image::open_relocatable(file, sections)?,
        None => Image::open(file)?,
    };
    let ty = if let Some(variable) = image.variable(name)? {
        match variable.address {
            Some(address) => writeln!(out, "{name} at {address:#x}")?,
            None => writeln!(out, "{name} (no fixed address)")?,
        }
        variable.ty
    } else if let Some(ty) = image.type_by_name(name)? {
        Some(ty)
    } else {
        return Ok(false);
    };
    match ty {
        Some(ty) => print_type(out, &image, ty, 0, 0)?,
        None => writeln!(out, "type = void")?,
    }
    Ok(true)
}

/// Prints `id` and, for structs and unions (also behind typedefs and arrays), each member with
/// its absolute offset and size, nested.
fn print_type(
    out: &mut impl Write,
    image: &Image,
    id: TypeId,
    base: u64,
    indent: usize,
) -> Result<(), Failure> {
    // Real types nest a few levels; corrupt DWARF can make a struct contain itself.
    if indent > 32 {
        return Err("types nest more than 32 levels deep".into());
    }
    let pad = "    ".repeat(indent);
    let size = image.size_of(id)?.map_or("?".into(), |s| s.to_string());
    writeln!(out, "{pad}type = {} (size {size})", image.type_name(id)?)?;
    let mut shown = image.value_type(id)?;
    while let TypeKind::Array(array) = &image.type_(shown)?.kind {
        match array.element {
            Some(element) => shown = image.value_type(element)?,
            None => return Ok(()),
        }
    }
    let ty = image.type_(shown)?;
    match &ty.kind {
        TypeKind::Struct(members) | TypeKind::Union(members) => {
            for member in members {
                let name = member.name.as_deref().unwrap_or("<anonymous>");
                let at = base.saturating_add(member.offset);
                match member.bit_field {
                    Some(bits) => writeln!(
                        out,
                        "{pad}  /* bit {:>5}: {:>2} */ {name}",
                        base.saturating_mul(8).saturating_add(bits.bit_offset),
                        bits.bit_size
                    )?,
                    None => writeln!(out, "{pad}  /* {at:>#6x} */ {name}")?,
                }
                if let Some(member_ty) = member.ty {
                    print_type(out, image, member_ty, at, indent + 1)?;
                }
            }
        }
        TypeKind::Variants(variants) => {
            if let Some(discriminant) = &variants.discriminant {
                let at = base.saturating_add(discriminant.offset);
                writeln!(out, "{pad}  /* {at:>#6x} */ <discriminant>")?;
            }
            for variant in &variants.variants {
                let name = variant.member.name.as_deref().unwrap_or("<anonymous>");
                match variant.discr_value {
                    Some(value) => writeln!(out, "{pad}  variant {name} (discriminant {value})")?,
                    None => writeln!(out, "{pad}  variant {name} (otherwise)")?,
                }
                if let Some(ty) = variant.member.ty {
                    let at = base.saturating_add(variant.member.offset);
                    print_type(out, image, ty, at, indent + 1)?;
                }
            }
        }
        TypeKind::Enum(e) => {
            for enumerator in &e.enumerators {
                writeln!(out, "{pad}  {} = {}", enumerator.name, enumerator.value)?;
            }
        }
        _ => {}
    }
    Ok(())
}
