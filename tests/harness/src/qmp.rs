//! A minimal QMP client: one command at a time over QEMU's unix socket, events queued
//! while waiting for a reply so none is lost.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    events: VecDeque<Value>,
    /// A message's bytes read before a read timed out: the rest follows in the next read.
    partial: Vec<u8>,
}

impl Qmp {
    /// Connects (retrying until `timeout`, QEMU creates the socket as it starts), reads the
    /// greeting and leaves capabilities negotiation mode.
    pub fn connect(socket: &Path, timeout: Duration) -> Result<Self> {
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(stream) => break stream,
                Err(_) if start.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(err) => {
                    return Err(err)
                        .with_context(|| format!("connecting to QMP socket {}", socket.display()))
                }
            }
        };
        let mut qmp = Qmp {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            events: VecDeque::new(),
            partial: Vec::new(),
        };
        let greeting = qmp
            .read_message(timeout)?
            .with_context(|| format!("no QMP greeting within {timeout:?}"))?;
        if greeting.get("QMP").is_none() {
            bail!("QMP greeting expected, got {greeting}");
        }
        qmp.execute("qmp_capabilities", json!({}), timeout)?;
        Ok(qmp)
    }

    /// The next message, or `None` if none came whole within `timeout`.
    fn read_message(&mut self, timeout: Duration) -> Result<Option<Value>> {
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        match self.reader.read_until(b'\n', &mut self.partial) {
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(None)
            }
            Err(err) => return Err(err).context("reading from QMP socket"),
            Ok(0) => bail!("QEMU closed the QMP socket (did the guest or QEMU exit?)"),
            Ok(_) => {}
        }
        let line = std::mem::take(&mut self.partial);
        serde_json::from_slice(&line).with_context(|| {
            format!(
                "QMP sent non-JSON line {:?}",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// Runs one command and returns its `return` value; a QMP `error` becomes an Err.
    pub fn execute(&mut self, command: &str, arguments: Value, timeout: Duration) -> Result<Value> {
        // One write: QEMU acts on a complete JSON object at once, and after `quit` it may
        // close the socket before a separate newline could be written.
        let request = format!(
            "{}\n",
            json!({ "execute": command, "arguments": arguments })
        );
        self.writer
            .write_all(request.as_bytes())
            .with_context(|| format!("sending QMP {command}"))?;
        loop {
            let message = self
                .read_message(timeout)?
                .with_context(|| format!("no reply to QMP {command} within {timeout:?}"))?;
            if message.get("event").is_some() {
                self.events.push_back(message);
            } else if let Some(value) = message.get("return") {
                return Ok(value.clone());
            } else if let Some(error) = message.get("error") {
                bail!("QMP {command} failed: {error}");
            } else {
                bail!("unexpected QMP message {message}");
            }
        }
    }

    /// Asks QEMU to exit and waits until it closes the socket (closing ours first could
    /// make QEMU drop the command unread).
    pub fn quit(mut self, timeout: Duration) -> Result<()> {
        let request = format!("{}\n", json!({ "execute": "quit" }));
        self.writer
            .write_all(request.as_bytes())
            .context("sending QMP quit")?;
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Err(err) => Err(err).context("waiting for QEMU to close QMP after quit"),
        }
    }

    /// Waits for the named event (queued or new) and returns it.
    pub fn wait_event(&mut self, name: &str, timeout: Duration) -> Result<Value> {
        self.poll_event(name, timeout)?
            .with_context(|| format!("no QMP {name} event within {timeout:?}"))
    }

    /// Waits up to `wait` for the named event (queued or new): `None` if it has not come.
    pub fn poll_event(&mut self, name: &str, wait: Duration) -> Result<Option<Value>> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(pos) = self.events.iter().position(|e| e["event"] == name) {
                return Ok(self.events.remove(pos));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let message = self
                .read_message(left)
                .with_context(|| format!("waiting for QMP event {name}"))?;
            match message {
                Some(message) if message.get("event").is_some() => self.events.push_back(message),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }
}
