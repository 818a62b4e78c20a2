# klog's job done the drgn way, for kcrash/benches/versus.sh: every KLog ring rebuilt from the
# program's KLogs array and printed merged, newest first, in klog's FULL form
# ("[    4.163071100] [5d][0,0,SCHED] task:... curPD:199"), the format strings and %s arguments
# read from the dump. Run as `drgn -q -c DUMP -s IMAGE [-s MODULE.ko] klog_drgn.py`.
#
# A straightforward script, as a drgn user would write it: one read per ring, records sorted by
# clock, C's printf conversions mapped onto Python's % operator. It does not check records for
# damage (torn, stale or scribbled slots), which kcrash's reader does.
import re
import struct
import sys

from drgn import FaultError

CONVERSION = re.compile(rb"%([-+ #0]*)(\d*|\*)(?:\.(\d+))?(hh|h|ll|l|z|j|t)?([diouxXcsp%])")


def cstring(address, limit=4096):
    if address == 0:
        return b"(null)"
    try:
        data = prog.read(address, limit)
    except FaultError:
        return b"<unreadable>"
    end = data.find(b"\0")
    return data if end < 0 else data[:end]


formats = {}


def message(desc, args):
    fmt = formats.get(desc)
    if fmt is None:
        fmt = formats[desc] = cstring(desc)
    out = []
    at = 0
    words = iter(args)
    for m in CONVERSION.finditer(fmt):
        out.append(fmt[at : m.start()])
        at = m.end()
        flags, width, precision, size, conv = m.groups()
        if conv == b"%":
            out.append(b"%")
            continue
        value = next(words, 0)
        spec = "%" + flags.decode() + (width.decode() if width != b"*" else "")
        if precision is not None:
            spec += "." + precision.decode()
        if conv == b"s":
            out.append((spec + "s").encode() % cstring(value))
            continue
        if conv == b"p":
            out.append(b"0x%x" % value)
            continue
        if conv in b"di":
            bits = {b"hh": 8, b"h": 16, None: 32}.get(size, 64)
            value &= (1 << bits) - 1
            if value >> (bits - 1):
                value -= 1 << bits
            conv = b"d"
        elif conv in b"ouxX" and size in (None, b"h", b"hh"):
            value &= {b"hh": 0xFF, b"h": 0xFFFF, None: 0xFFFFFFFF}[size]
        elif conv == b"c":
            value &= 0xFF
        out.append((spec + conv.decode()).encode() % value)
    out.append(fmt[at:])
    return b"".join(out)


hz = int(prog["klogClockHz"])
records = []
for klog in prog["KLogs"]:
    name = cstring(klog.name.value_()).decode(errors="replace")
    words = int(klog.buffer_size_1) + 1
    held = min(int(klog.next_write) // 8, int(klog.num_recs))
    if held == 0:
        continue
    ring = prog.read(klog.buffer.value_(), words * 8)
    first = int(klog.next_write) // 8 - held
    for n in range(first, first + held):
        slot = (n * 8) & (words - 1)
        rec = struct.unpack_from("<8Q", ring, slot * 8)
        if rec[0] == 0:
            continue
        records.append((rec[3], name, rec))

records.sort(key=lambda r: r[0], reverse=True)
write = sys.stdout.buffer.write
for clock, name, rec in records:
    seconds, ticks = divmod(clock, hz)
    proc, dom = rec[2] >> 32, rec[2] & 0xFFFFFFFF
    write(
        b"[%5d.%09d] [%x][%d,%d,%s] %s\n"
        % (seconds, ticks * 1000000000 // hz, rec[1], proc, dom, name.encode(), message(rec[4], rec[5:8]))
    )
