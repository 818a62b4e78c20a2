#!/usr/bin/env python3
"""Reads a Perfetto trace with Perfetto's own generated protobuf classes (PyPI's `perfetto`
package) and prints, as one JSON document, what a viewer would find in it: the trace's
attributes and kernel release, every track (name, parent), every track event with its interned
strings resolved (track, parent track, timestamp, name, arguments), and every breach of the
sequence rules a reader relies on:

- every packet names its sequence (trusted_packet_sequence_id);
- a sequence's first packet clears its incremental state, and no later one does;
- every interned id is defined before it is used, in the same sequence, and defined once;
- a track is described once, or alike every time, and every event's track is described.

kcrash's export tests compare the events with the kernel's own log.

Usage: perfetto_read.py TRACE... prints one JSON document a line, in the order of the traces: one
interpreter reads them all (its start-up took longer than reading a trace of the corpus).
"""

import gc
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def value(a):
    """A debug annotation's value as JSON: {"uint": n}, {"string": s}, {"dict": {...}} ..."""
    if a.dict_entries:
        return {"dict": {e.name: value(e) for e in a.dict_entries}}
    kind = a.WhichOneof("value")
    if kind is None:
        return None
    v = getattr(a, kind)
    return {kind.replace("_value", ""): v}


def read(path):
    """What a viewer would find in the trace at path, and the rules it breaks."""
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    errors = []
    attributes = {}
    release = None
    tracks = {}
    events = []
    sequences = {}
    for i, p in enumerate(trace.packet):
        sid = p.trusted_packet_sequence_id
        if sid == 0:
            errors.append(f"packet {i}: no sequence id")
        seq = sequences.setdefault(sid, {"packets": 0, "cleared": False, "names": {}, "keys": {}})
        first = seq["packets"] == 0
        seq["packets"] += 1
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            if not first and seq["cleared"]:
                errors.append(f"packet {i}: sequence {sid} cleared its state again")
            seq["cleared"] = True
        if p.HasField("interned_data"):
            if not seq["cleared"]:
                errors.append(f"packet {i}: sequence {sid} interns before clearing its state")
            for table, entries in (("names", p.interned_data.event_names),
                                   ("keys", p.interned_data.debug_annotation_names)):
                for e in entries:
                    if e.iid in seq[table]:
                        errors.append(f"packet {i}: sequence {sid} defines {table} id {e.iid} again")
                    seq[table][e.iid] = e.name
        if p.HasField("trace_attributes"):
            for a in p.trace_attributes.attribute:
                attributes[a.key] = a.string_value
        if p.HasField("system_info"):
            release = p.system_info.utsname.release
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            desc = {"name": t.name, "parent": t.parent_uuid if t.HasField("parent_uuid") else None}
            if tracks.get(t.uuid, desc) != desc:
                errors.append(f"packet {i}: track {t.uuid} described differently")
            tracks[t.uuid] = desc
        if p.HasField("track_event"):
            e = p.track_event
            if e.type != pb.TrackEvent.TYPE_INSTANT:
                errors.append(f"packet {i}: event of type {e.type}")
            name = seq["names"].get(e.name_iid)
            if name is None:
                errors.append(f"packet {i}: sequence {sid} uses event name id {e.name_iid} undefined")
            args = {}
            for a in e.debug_annotations:
                key = seq["keys"].get(a.name_iid)
                if key is None:
                    errors.append(f"packet {i}: sequence {sid} uses argument name id {a.name_iid} undefined")
                    continue
                args[key] = value(a)
            events.append({"track": e.track_uuid, "ts": p.timestamp, "name": name,
                           "args": args, "sequence": sid})
    for e in events:
        t = tracks.get(e["track"])
        if t is None:
            errors.append(f"event on undescribed track {e['track']}")
            continue
        e["track"] = t["name"]
        parent = tracks.get(t["parent"])
        e["parent"] = parent["name"] if parent else None
    if len(errors) > 20:
        errors = errors[:20] + [f"... and {len(errors) - 20} more"]
    return {"attributes": attributes, "release": release, "tracks": len(tracks),
            "events": events, "errors": errors}


if __name__ == "__main__":
    # The objects made here live until the end: collecting cycles among them only costs time.
    gc.disable()
    for path in sys.argv[1:]:
        json.dump(read(path), sys.stdout)
        sys.stdout.write("\n")
