//! Which dumps a batch reads: files, directories (every dump under them, told by content),
//! glob patterns, and list files (`@LIST`: a dump a line, each with its image and modules if
//! the line names them), sorted by path so that every machine splits them into the same shards.

use std::path::{Path, PathBuf};

/// How deep a directory is searched for dumps.
const MAX_DEPTH: usize = 16;

/// One dump to read, with the files that go with it (an image, `.ko` modules) when a list file
/// names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Job {
    pub dump: PathBuf,
    pub with: Vec<PathBuf>,
}

/// The dumps `sources` name, sorted and without repeats, or the first source that names none
/// (a missing file, an unreadable list, a pattern or directory with no dump), saying why.
pub fn list(sources: &[String]) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for source in sources {
        let before = jobs.len();
        if let Some(list) = source.strip_prefix('@') {
            read_list(Path::new(list), &mut jobs)?;
        } else if Path::new(source).is_dir() {
            walk(Path::new(source), 0, &mut jobs);
        } else if Path::new(source).exists() {
            jobs.push(Job {
                dump: PathBuf::from(source),
                with: Vec::new(),
            });
        } else {
            let paths = glob::glob(source)
                .map_err(|e| format!("{source}: no such file, and not a pattern: {e}"))?;
            jobs.extend(paths.flatten().filter(|p| is_dump(p)).map(|dump| Job {
                dump,
                with: Vec::new(),
            }));
        }
        if jobs.len() == before {
            return Err(format!("{source}: no dump there"));
        }
    }
    jobs.sort();
    jobs.dedup_by(|a, b| a.dump == b.dump);
    Ok(jobs)
}

/// `@LIST`: each line `DUMP [IMAGE] [MODULE.ko...]`, words split as a shell splits them, paths
/// relative to the list's directory; blank lines and `#` comments skipped.
fn read_list(list: &Path, jobs: &mut Vec<Job>) -> Result<(), String> {
    let text = std::fs::read_to_string(list).map_err(|e| format!("@{}: {e}", list.display()))?;
    let base = list.parent().unwrap_or(Path::new(""));
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words =
            shell_words::split(line).map_err(|e| format!("@{}:{}: {e}", list.display(), i + 1))?;
        let mut paths = words.iter().map(|w| base.join(w));
        if let Some(dump) = paths.next() {
            jobs.push(Job {
                dump,
                with: paths.collect(),
            });
        }
    }
    Ok(())
}

/// Every dump under `dir`, in no particular order (the caller sorts).
fn walk(dir: &Path, depth: usize, jobs: &mut Vec<Job>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() && depth < MAX_DEPTH => walk(&path, depth + 1, jobs),
            Ok(m) if m.is_file() && is_dump(&path) => jobs.push(Job {
                dump: path,
                with: Vec::new(),
            }),
            _ => {}
        }
    }
}

/// Whether `path`'s first bytes are a dump's (an ELF core, kdump, flattened, diskdump or gzip
/// file), as kcrash tells a dump from an image on its command line.
fn is_dump(path: &Path) -> bool {
    use dumpfmt::FileKind as Kind;
    let Ok(mut file) = dumpfmt::open_regular(path) else {
        return false;
    };
    matches!(
        dumpfmt::read_head(&mut file),
        Ok((
            _,
            Some(Kind::ElfCore | Kind::Kdump | Kind::KdumpFlattened | Kind::Diskdump | Kind::Gzip)
        ))
    )
}

/// `K/N`: the K-th of N shards (1 ≤ K ≤ N), for spreading one batch over many machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?} is not a shard K/N (1 ≤ K ≤ N)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether the `i`-th of a sorted list is this shard's: every N-th from the K-th, so that
    /// shards get even shares of any list and together the whole of it.
    pub fn takes(&self, i: usize) -> bool {
        i % self.count as usize == (self.index - 1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_a_list_evenly_and_wholly() {
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for i in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.takes(i)).count(), 1, "{i}");
        }
        assert!(shards[0].takes(0) && shards[1].takes(1) && shards[2].takes(5));
        for bad in ["0/3", "4/3", "1", "a/b", "1/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!("2/5".parse::<Shard>().unwrap().to_string(), "2/5");
    }
}
