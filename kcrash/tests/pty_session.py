"""Drives an interactive kcrash under a pseudo-terminal, as a person would: the prompt, tab
completion of commands, symbols and subsystems, a pipe, the pager, colour, Ctrl-C stopping a long
command (and not kcrash), and history kept across sessions in $HOME/.kcrash_history.

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
    def __init__(self, **extra_env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            env = dict(os.environ, HOME=home, TERM="xterm", PAGER="sed s/^/paged:/")
            env.pop("NO_COLOR", None)
            env.pop("LESS", None)
            env.update(extra_env)
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
