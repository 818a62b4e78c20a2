"""Drives an interactive kcrash under a pseudo-terminal, as a person would: the prompt, tab
completion of commands, symbols, subsystems, members, type names and options (listed on a
second Tab), a pipe, the pager, colour, Ctrl-C stopping a long command (and not kcrash), history kept across
sessions in $HOME/.kcrash_history, and the prompt kept off a redirected standard output.

Usage: pty_session.py KCRASH DUMP IMAGE HOME. Exits 0 when every step saw what it expected."""

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

binary, dump, image, home = sys.argv[1:5]


class Session:
    def __init__(self, stdout=None, **extra_env):
        """`stdout`: a file kcrash's standard output is redirected to, the terminal staying its
        standard input and controlling terminal."""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            env = dict(os.environ, HOME=home, TERM="xterm", PAGER="sed s/^/paged:/")
            env.pop("NO_COLOR", None)
            env.pop("LESS", None)
            env.update(extra_env)
            if stdout is not None:
                os.dup2(os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
            os.execve(binary, [binary, dump, image], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.seen = b""

    def expect(self, pattern, timeout=30):
        """Reads until `pattern` (bytes regex) matches what came since the last match."""
        deadline = time.time() + timeout
        while True:
            m = re.search(pattern, self.seen, re.S)
            if m:
                before = self.seen[: m.end()]
                self.seen = self.seen[m.end():]
                return before
            left = deadline - time.time()
            if left <= 0:
                fail(f"timed out waiting for {pattern!r}; got {self.seen[-2000:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                fail(f"kcrash ended waiting for {pattern!r}; got {self.seen[-2000:]!r}")
            # rustyline may ask where the cursor is: answer "column 1".
            if b"\x1b[6n" in chunk:
                os.write(self.fd, b"\x1b[1;1R")
            self.seen += chunk

    def send(self, text):
        """Types `text` a key at a time, as a person does (escape sequences whole)."""
        for key in re.findall(r"\x1b\[.|.", text, re.S):
            os.write(self.fd, key.encode())
            time.sleep(0.01)

    def prompt(self):
        return self.expect(rb"kcrash> ")

    def finish(self):
        self.send("q\r")
        _, status = os.waitpid(self.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            fail(f"kcrash exited with {status:#x}")


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


s = Session()
s.prompt()

# Tab completes a symbol name; output to the terminal goes through the pager, in colour.
s.send("sym KLogB\t\r")
out = s.expect(rb"paged:[^\n]*KLogBuffer[^\n]*\n")
line = out[out.rindex(b"paged:"):]
plain = re.sub(rb"\x1b\[[0-9;]*m", b"", line)
if not re.search(rb"^paged:[0-9a-f]{16} \(B\) KLogBuffer ", plain) or plain == line:
    fail(f"sym after completion, paged and in colour: {line!r}")
s.prompt()

# A command name, then a pipe: output goes to the pipeline, not the pager.
s.send("he\t rd | head -1\r")
out = s.expect(rb"Display memory[^\n]*\n")
if b"paged:" in out:
    fail(f"help rd | head -1 went to the pager: {out!r}")
s.prompt()

# A subsystem name, completed case-insensitively; set scroll off bypasses the pager.
s.send("set scroll off\r")
s.prompt()
s.send("klog sc\t -n 1\r")
out = s.expect(rb"\[SCHED\][^\n]*\n")
if b"paged:" in out:
    fail(f"klog SCHED -n 1 was paged with scroll off: {out!r}")
s.prompt()

# A member after `.`, through a struct the DWARF lays out, and an option after `-`.
s.send("p KLogs[1].next_w\t\r")
s.expect(rb"p KLogs\[1\]\.next_write[^\n]*\n[0-9]+\r?\n")
s.prompt()
s.send("whatis u6\t\r")
s.expect(rb"type = u64")
s.prompt()
s.send("sym --js\t KLogs\r")
s.expect(rb'"kcrash_json"')
s.prompt()
# A second Tab lists the candidates: bt's options.
s.send("bt -\t\t")
out = s.expect(rb"--json[^\n]*\n(.|\n)*kcrash> (\x1b\[[0-9;]*m)?bt -")
for option in (b"-a", b"-f", b"-l", b"--json"):
    if option not in out:
        fail(f"bt's options listed: {out!r}")
s.send("\x03")
s.prompt()

# Ctrl-C stops a long command (an endless read of unreadable memory) and the session goes on.
s.send("rd 0 100000000000 > /dev/null\r")
time.sleep(1.0)
s.send("\x03")
s.expect(rb"rd: interrupted")
s.prompt()
# Ctrl-C at the prompt only drops the line.
s.send("sym nonsense\x03")
s.prompt()
# A pasted line: every key in one read.
os.write(s.fd, b"sym KLogs\r")
s.expect(rb"\(D\) [^\n]*KLogs")
s.prompt()
# A paste of two lines, bracketed as terminals paste: both run, in order.
s.send("\x1b[200~sym KLogs\rsym KLogBuffer\x1b[201~\r")
s.expect(rb"\(D\) [^\n]*KLogs[^\n]*\n[^\n]*\(B\) [^\n]*KLogBuffer")
s.prompt()
# An unknown command is one line of error and the prompt again.
s.send("frobnicate\r")
s.expect(rb"frobnicate: no such command \(try help\)\r?\n")
s.prompt()
s.finish()

history = open(os.path.join(home, ".kcrash_history"), encoding="utf-8").read()
for line in ["sym KLogBuffer", "klog SCHED -n 1", "sym KLogs"]:
    if line not in history:
        fail(f"{line!r} not in history: {history!r}")

# A new session recalls the last commands: q, frobnicate, then sym KLogs.
s = Session()
s.prompt()
s.send("\x1b[A\x1b[A\x1b[A\r")
s.expect(rb"\(D\) [^\n]*KLogs")
s.prompt()
s.finish()

# Standard output redirected to a file: the prompt and the edited line stay on the terminal, the
# file gets only the commands' output.
redirected = os.path.join(home, "redirected.out")
s = Session(stdout=redirected)
s.prompt()
s.send("sym KLogs\r")
s.prompt()
s.finish()
out = open(redirected, "rb").read()
if b"kcrash>" in out or not re.fullmatch(rb"[0-9a-f]{16} \(D\) KLogs[^\n]*\n", out):
    fail(f"redirected standard output: {out!r}")

# The pager gets LESS=FRX when LESS is unset (as git does: less then passes colour through and
# quits on a short page), and the user's LESS otherwise.
for given, want in [(None, b"FRX"), ("-S", b"-S")]:
    extra = {"PAGER": 'sed "s/^/LESS=$LESS:/"'}
    if given is not None:
        extra["LESS"] = given
    s = Session(**extra)
    s.prompt()
    s.send("sym KLogs\r")
    out = s.expect(rb"LESS=[^:\n]*:[^\n]*KLogs[^\n]*\n")
    if b"LESS=" + want + b":" not in out:
        fail(f"the pager's LESS with LESS={given!r}: {out!r}")
    s.prompt()
    s.finish()

# NO_COLOR: no colour even on a terminal, prompt included.
s = Session(NO_COLOR="1")
out = s.prompt()
s.send("sym KLogs\r")
out += s.expect(rb"\(D\) [^\n]*KLogs[^\n]*\n")
s.prompt()
if re.search(rb"\x1b\[[0-9;]*m", out):
    fail(f"colour despite NO_COLOR: {out!r}")
s.finish()
print("ok")
