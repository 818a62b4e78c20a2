//! The commands a kcrash session runs, each parsing its own arguments.

pub mod klog;
pub mod log;
pub mod modules;
pub mod print;
pub mod rd;
pub mod sym;
pub mod sys;
pub mod types;
