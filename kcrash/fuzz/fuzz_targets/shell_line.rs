//! A command line as the prompt and scripts give it: split at its plumbing (`|`, `>`, `>>`),
//! then the command word-split, its arguments parsed and the command run on a session over the
//! corpus's bare `rings` dump, output kept in memory up to 1 MiB (then writes fail, as into a
//! closed pipe, so a command asked for a huge output stops). Nothing is ever handed to a shell,
//! nor any file opened for `>`. A panic is a bug.
//!
//! Seeds: `seeds shell_line` takes every command line of `corpus/manifest.toml`.

#![no_main]

use kcrash::commands::{self, Settings};
use kcrash::paint::Paint;
use kcrash::redirect::{split, Target};
use kcrash::session::Session;
use kcrash_fuzz::{repo, Capped};
use libfuzzer_sys::fuzz_target;

thread_local! {
    /// The session, opened once; leaked, as it lives as long as the process.
    static SESSION: &'static Session<'static> = {
        let dir = repo().join("corpus/bare");
        let dump = dumpfmt::Dump::open(dir.join("rings/vmcore.kdump")).expect("corpus dump");
        let dump: &'static dumpfmt::Dump = Box::leak(Box::new(dump));
        let session = Session::open(dump, Some(dir.join("vmlinux"))).expect("corpus session");
        Box::leak(Box::new(session))
    };
}

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
        return;
    }
    let Ok((command, target)) = split(line) else {
        return;
    };
    if let Target::File { path, .. } = &target {
        std::hint::black_box(path);
    }
    let mut settings = Settings::plain();
    let capped = || Capped {
        bytes: Vec::new(),
        limit: 1 << 20,
    };
    let (mut out, mut err) = (capped(), capped());
    SESSION.with(|session| {
        let _ = commands::execute(
            session,
            &mut settings,
            &mut out,
            &mut err,
            Paint { on: false },
            command,
        );
    });
});
