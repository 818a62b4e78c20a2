//! Reading command lines: at the prompt (line editing, completion, history) and from scripts
//! (`-c`, command files, standard input). Each line runs through [`redirect::run_line`].

mod complete;

use std::io::{self, IsTerminal, Write};

use anyhow::Result;

use crate::commands::{Flow, Settings};
use crate::redirect;
use crate::session::Session;

pub use complete::Completion;

/// A session's shell: the settings and the dispatch with its output plumbing.
pub struct Shell<'a, 'd> {
    pub session: &'a Session<'d>,
    pub settings: Settings,
    /// Standard output is a terminal (the pager and `auto` colour apply).
    stdout_terminal: bool,
}

impl<'a, 'd> Shell<'a, 'd> {
    pub fn new(session: &'a Session<'d>, settings: Settings) -> Self {
        Shell {
            session,
            settings,
            stdout_terminal: io::stdout().is_terminal(),
        }
    }

    /// Runs one command line (see [`redirect::run_line`]).
    pub fn run_line(&mut self, line: &str, err: &mut dyn Write) -> Result<Flow> {
        redirect::run_line(
            self.session,
            &mut self.settings,
            line,
            None,
            err,
            self.stdout_terminal,
        )
    }
}
