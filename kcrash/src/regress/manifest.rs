//! A corpus's `manifest.toml` (schema: corpus/README.md): every kernel image and every crash
//! entry, with its dumps and the checks `kcrash regress` runs on them. The one definition of the
//! file: `kcrash regress` reads it, and the test harness (tests/harness) writes it with these
//! same types. Fields the schema does not know are ignored.

use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub const FILE_NAME: &str = "manifest.toml";

/// The schema version written: 3 added the entries' `check` tables.
pub const VERSION: u32 = 3;

/// Manifest versions this reads. Version 2 has no checks: its entries run nothing, which
/// [`Manifest::load`] turns into an error rather than a run that passes by checking nothing.
const READS: [u32; 2] = [2, VERSION];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// The command that regenerates this corpus.
    pub regenerate: String,
    #[serde(default, rename = "kernel")]
    pub kernels: Vec<Kernel>,
    #[serde(default, rename = "entry")]
    pub entries: Vec<Entry>,
}

/// A kernel image (the "vmlinux", or a hosted program's executable): ELF with symbols and DWARF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    /// The image, relative to the corpus directory.
    pub image: String,
    /// `elf-exec` (linked at fixed addresses) or `elf-dyn` (a PIE: apply the load bias).
    pub magic: String,
    /// How it was built.
    pub built_by: String,
    /// Whether the image is in the repository (false: made by the regenerate command).
    pub committed: bool,
}

/// One crash of one kernel in one scenario: every dump of it must print what each check
/// expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique in the manifest: the entry's directory (`bare/rings`, `hosted/rings-gcore`).
    pub name: String,
    pub kernel: String,
    pub scenario: String,
    /// Kernel command line (bare) or program arguments (hosted).
    pub cmdline: String,
    /// Console output holding the oracle lines.
    pub console: String,
    /// Expected result (JSON) derived from the console.
    pub expected: String,
    /// Whether this entry's files are in the repository (false: made by the regenerate
    /// command, e.g. the big-ring benchmark dumps).
    pub committed: bool,
    #[serde(default, rename = "dump")]
    pub dumps: Vec<Dump>,
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dump {
    /// The producer's format name: elf, elf-paging, kdump-zlib-flat, kdump-zlib, raw (QEMU
    /// guests); elf-core, elf-core-gcore (hosted programs).
    pub format: String,
    /// What wrote it.
    pub producer: String,
    /// Relative to the corpus directory; a gzip file is read through its content.
    pub path: String,
    /// The file is gzip-compressed (the dump is its decompressed content).
    pub gzip: bool,
    /// Magic of the (decompressed) dump: elf-core, kdump, makedumpfile-flattened; `raw` for
    /// raw memory, which has none.
    pub magic: String,
    /// A raw memory image (no header): the physical address of its first byte. kcrash opens
    /// it as `path@phys_start`. Absent for every other dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_start: Option<u64>,
}

impl Dump {
    /// The dump as kcrash's command line names it: the file under `dir`, or `FILE@ADDRESS`
    /// for a raw memory image.
    pub fn argument(&self, dir: &Path) -> std::path::PathBuf {
        let path = dir.join(&self.path);
        match self.phys_start {
            Some(start) => {
                let mut word = path.into_os_string();
                word.push(format!("@{start:#x}"));
                word.into()
            }
            None => path,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// A command line as typed at kcrash's prompt.
    pub command: String,
    /// The file holding the expected output, relative to the corpus directory; written by
    /// `kcrash regress DIR --update`.
    pub expect: String,
    pub compare: Compare,
    /// Rewrites applied, in order, to the output before it is compared or written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace: Vec<Replace>,
}

/// Every match of `regex` in the output becomes `with` (`$1` names a group): for what a dump's
/// format rightly changes and a check should not pin, such as the reason kcrash gives for an
/// unreadable `%s` address, which tells how that format's translation failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Replace {
    #[serde(deserialize_with = "regex", serialize_with = "regex_text")]
    pub regex: Regex,
    pub with: String,
}

/// Rules are equal when they are written the same.
impl PartialEq for Replace {
    fn eq(&self, other: &Replace) -> bool {
        self.regex.as_str() == other.regex.as_str() && self.with == other.with
    }
}

impl Eq for Replace {}

fn regex<'de, D: Deserializer<'de>>(d: D) -> Result<Regex, D::Error> {
    let text = String::deserialize(d)?;
    Regex::new(&text).map_err(serde::de::Error::custom)
}

fn regex_text<S: Serializer>(regex: &Regex, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(regex.as_str())
}

/// How a check's output is compared with its expected file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// Byte for byte (standard output, then any `--- stderr ---` and `--- error ---` parts).
    Text,
    /// Structurally: object field order and whitespace do not matter.
    Json,
}

impl Manifest {
    /// Reads `dir/manifest.toml`; the error names the file and says what is wrong.
    pub fn load(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join(FILE_NAME);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if !READS.contains(&manifest.version) {
            return Err(format!(
                "{}: manifest version {}; kcrash reads versions {READS:?}",
                path.display(),
                manifest.version
            ));
        }
        if manifest.entries.iter().all(|e| e.checks.is_empty()) {
            return Err(format!(
                "{}: no entry lists a check (version {} manifest); regenerate it with the \
                 command in corpus/README.md for version 3 checks",
                path.display(),
                manifest.version
            ));
        }
        let mut names: Vec<&str> = manifest.entries.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(format!(
                "{}: entry {} listed twice",
                path.display(),
                pair[0]
            ));
        }
        Ok(manifest)
    }

    /// Writes `dir/manifest.toml`, headed by the command that regenerates it.
    pub fn store(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(FILE_NAME);
        let body = toml::to_string_pretty(self).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = format!(
            "# Generated by `{}`; schema in corpus/README.md.\n",
            self.regenerate
        );
        std::fs::write(&path, format!("{header}{body}"))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Manifest, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
        Manifest::load(dir.path())
    }

    const ENTRY: &str = r#"regenerate = "make it"

[[kernel]]
name = "bare"
image = "bare/vmlinux"
magic = "elf-exec"
built_by = "cargo"
committed = true
unknown = "ignored"

[[entry]]
name = "bare/rings"
kernel = "bare"
scenario = "rings"
cmdline = ""
console = "bare/rings/console.log"
expected = "bare/rings/expected.json"
committed = true

[[entry.dump]]
format = "elf"
producer = "QEMU"
path = "bare/rings/vmcore.elf.gz"
gzip = true
magic = "elf-core"
"#;

    #[test]
    fn reads_checks_and_ignores_fields_it_does_not_use() {
        let text = format!(
            "version = 3\n{ENTRY}\n[[entry.check]]\ncommand = \"klog -s --json\"\n\
             expect = \"bare/rings/regress/klog-s.json\"\ncompare = \"json\"\n\
             [[entry.check.replace]]\nregex = \"(<unreadable 0x[0-9a-f]+): [^>]*>\"\nwith = \"$1>\"\n"
        );
        let m = load(&text).unwrap();
        let e = &m.entries[0];
        assert_eq!(e.dumps[0].path, "bare/rings/vmcore.elf.gz");
        assert_eq!(e.dumps[0].phys_start, None);
        assert_eq!(
            e.dumps[0].argument(Path::new("c")),
            Path::new("c/bare/rings/vmcore.elf.gz")
        );
        assert_eq!(e.checks[0].command, "klog -s --json");
        assert_eq!(e.checks[0].compare, Compare::Json);
        assert_eq!(m.kernel("bare").unwrap().image, "bare/vmlinux");
        let rule = &e.checks[0].replace[0];
        let text = "map <unreadable 0xffffffffc0001000: not mapped (x)> at 0x2000";
        assert_eq!(
            rule.regex.replace_all(text, rule.with.as_str()),
            "map <unreadable 0xffffffffc0001000> at 0x2000"
        );
    }

    #[test]
    fn stores_what_it_loads() {
        let text = format!(
            "version = 3\n{ENTRY}\n[[entry.check]]\ncommand = \"klog -s\"\n\
             expect = \"bare/rings/regress/klog-s.txt\"\ncompare = \"text\"\n\
             [[entry.check.replace]]\nregex = \"a(b)\"\nwith = \"$1\"\n"
        );
        let loaded = load(&text).unwrap();
        let dir = tempfile::tempdir().unwrap();
        loaded.store(dir.path()).unwrap();
        let stored = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(stored.starts_with("# Generated by `make it`"), "{stored}");
        assert!(!stored.contains("unknown"), "{stored}");
        assert_eq!(Manifest::load(dir.path()).unwrap(), loaded);
    }

    const RAW: &str = r#"
[[entry.dump]]
format = "raw"
producer = "qemu pmemsave"
path = "bare/rings/vmcore.raw.gz"
gzip = true
magic = "raw"
phys_start = 4096
"#;

    const CHECK: &str =
        "[[entry.check]]\ncommand = \"klog -s\"\nexpect = \"x\"\ncompare = \"text\"\n";

    #[test]
    fn a_raw_dump_carries_its_physical_start() {
        let m = load(&format!("version = 3\n{ENTRY}{RAW}{CHECK}")).unwrap();
        let raw = &m.entries[0].dumps[1];
        assert_eq!(raw.phys_start, Some(0x1000));
        assert_eq!(
            raw.argument(Path::new("corpus")),
            Path::new("corpus/bare/rings/vmcore.raw.gz@0x1000")
        );
        let dir = tempfile::tempdir().unwrap();
        m.store(dir.path()).unwrap();
        let stored = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(
            stored.matches("phys_start").count(),
            1,
            "written for the raw dump only: {stored}"
        );
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        let negative = RAW.replace("4096", "-1");
        let err = load(&format!("version = 3\n{ENTRY}{negative}{CHECK}")).unwrap_err();
        assert!(err.contains("phys_start"), "{err}");
        let text = RAW.replace("4096", "\"0x1000\"");
        let err = load(&format!("version = 3\n{ENTRY}{text}{CHECK}")).unwrap_err();
        assert!(err.contains("phys_start"), "{err}");
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        // A version 2 manifest has no checks: nothing would be checked.
        let err = load(&format!("version = 2\n{ENTRY}")).unwrap_err();
        assert!(err.contains("no entry lists a check"), "{err}");
        let err = load(&format!("version = 4\n{ENTRY}")).unwrap_err();
        assert!(err.contains("manifest version 4"), "{err}");
        let bad = format!(
            "version = 3\n{ENTRY}\n[[entry.check]]\ncommand = \"sys\"\nexpect = \"x\"\ncompare = \"yaml\"\n"
        );
        let err = load(&bad).unwrap_err();
        assert!(err.contains("yaml"), "{err}");
        let bad = format!(
            "version = 3\n{ENTRY}\n[[entry.check]]\ncommand = \"sys\"\nexpect = \"x\"\ncompare = \"text\"\n\
             replace = [{{ regex = \"(\", with = \"\" }}]\n"
        );
        let err = load(&bad).unwrap_err();
        assert!(err.contains("unclosed group"), "{err}");
        let err = load("version = 3\n[[entry]]\nkernel = \"bare\"\n").unwrap_err();
        assert!(err.contains("name"), "{err}");
        assert!(Manifest::load(Path::new("/nonexistent")).is_err());
    }
}
