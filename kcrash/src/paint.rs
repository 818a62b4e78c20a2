//! Colour, used sparingly (the prompt, errors, addresses, symbol names, unreadable marks) and
//! only where it was asked for: on a terminal under `--color=auto`, everywhere under `always`.

use std::fmt::Display;
use std::io::IsTerminal;

use owo_colors::OwoColorize;

/// `--color=auto|always|never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether output to a sink that is (or is not) a terminal gets colour. `NO_COLOR` (set and
    /// not empty) turns `auto` off; an explicit `always` wins over it.
    pub fn paint_for(self, is_terminal: bool) -> Paint {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint {
            on: match self {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => is_terminal && !no_color,
            },
        }
    }

    /// [`ColorChoice::paint_for`] standard error.
    pub fn stderr(self) -> Paint {
        self.paint_for(std::io::stderr().is_terminal())
    }
}

/// Colours text, or leaves it plain when `on` is false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    fn apply<T: Display>(self, text: T, colour: impl FnOnce(&T) -> String) -> String {
        if self.on {
            colour(&text)
        } else {
            text.to_string()
        }
    }

    /// An address at the start of a line.
    pub fn addr<T: Display>(self, text: T) -> String {
        self.apply(text, |t| t.cyan().to_string())
    }

    /// A symbol name.
    pub fn name<T: Display>(self, text: T) -> String {
        self.apply(text, |t| t.green().to_string())
    }

    /// Something that could not be read, or an error.
    pub fn bad<T: Display>(self, text: T) -> String {
        self.apply(text, |t| t.red().to_string())
    }

    /// A heading or the prompt.
    pub fn strong<T: Display>(self, text: T) -> String {
        self.apply(text, |t| t.bold().to_string())
    }
}
