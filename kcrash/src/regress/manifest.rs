//! What `kcrash regress` reads of a corpus's `manifest.toml` (schema: corpus/README.md): the
//! kernels' images, and for each entry its dumps and its checks. The harness
//! (tests/harness/src/manifest.rs) writes the file and reads every field; this reads only what
//! a regression run needs, so fields it does not know are ignored.

use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Deserializer};

pub const FILE_NAME: &str = "manifest.toml";

/// Manifest versions this reads. Version 2 has no checks: its entries run nothing, which
/// [`Manifest::load`] turns into an error rather than a run that passes by checking nothing.
const READS: [u32; 2] = [2, 3];

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub version: u32,
    #[serde(default, rename = "kernel")]
    pub kernels: Vec<Kernel>,
    #[serde(default, rename = "entry")]
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Kernel {
    pub name: String,
    /// The image, relative to the corpus directory.
    pub image: String,
}

/// One crash: every dump of it must print what each check expects.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    pub name: String,
    pub kernel: String,
    #[serde(default, rename = "dump")]
    pub dumps: Vec<Dump>,
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Dump {
    /// The producer's format name (elf, kdump-zlib, elf-core, ...), for reports.
    pub format: String,
    /// Relative to the corpus directory; a gzip file is read through its content.
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Check {
    /// A command line as typed at kcrash's prompt.
    pub command: String,
    /// The file holding the expected output, relative to the corpus directory.
    pub expect: String,
    pub compare: Compare,
    /// Rewrites applied, in order, to the output before it is compared or written.
    #[serde(default)]
    pub replace: Vec<Replace>,
}

/// Every match of `regex` in the output becomes `with` (`$1` names a group): for what a dump's
/// format rightly changes and a check should not pin, such as the reason kcrash gives for an
/// unreadable `%s` address, which tells how that format's translation failed.
#[derive(Debug, Clone, Deserialize)]
pub struct Replace {
    #[serde(deserialize_with = "regex")]
    pub regex: Regex,
    pub with: String,
}

fn regex<'de, D: Deserializer<'de>>(d: D) -> Result<Regex, D::Error> {
    let text = String::deserialize(d)?;
    Regex::new(&text).map_err(serde::de::Error::custom)
}

/// How a check's output is compared with its expected file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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

    const ENTRY: &str = r#"
[[kernel]]
name = "bare"
image = "bare/vmlinux"
magic = "elf-exec"

[[entry]]
name = "bare/rings"
kernel = "bare"
scenario = "rings"

[[entry.dump]]
format = "elf"
path = "bare/rings/vmcore.elf.gz"
gzip = true
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
