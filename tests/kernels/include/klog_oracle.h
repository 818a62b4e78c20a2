/* The oracle side the C test kernels share (tests/kernels/hosted-c, tests/kernels/linux): how an
 * oracle line escapes text, and where an event's record sits. Include it after klog.h. The line
 * format is the harness's (tests/harness/src/oracle.rs). */
#ifndef KLOG_ORACLE_H
#define KLOG_ORACLE_H

#ifdef __KERNEL__
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#endif

/* Appends `s` to `out`, escaped as Rust's str::escape_debug does for ASCII (the harness reverses
 * it); with `spaces`, a space becomes \u{20} too (fmt= runs to the next space). A byte >= 0x80
 * comes back as the code point U+0080..U+00FF, so the kernels log ASCII only. */
static inline void oracle_escape(char *out, size_t cap, const char *s, bool spaces)
{
	size_t n = strlen(out);

	/* Every escape is shorter than 12 bytes, so snprintf never truncates one. */
	for (; *s && n + 12 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		const char *e = NULL;

		switch (c) {
		case '\t': e = "\\t"; break;
		case '\r': e = "\\r"; break;
		case '\n': e = "\\n"; break;
		case '\\': e = "\\\\"; break;
		case '"': e = "\\\""; break;
		case '\'': e = "\\'"; break;
		case ' ': e = spaces ? "\\u{20}" : NULL; break;
		}
		if (e)
			n += (size_t)snprintf(out + n, cap - n, "%s", e);
		else if (c < 0x20 || c >= 0x7f)
			n += (size_t)snprintf(out + n, cap - n, "\\u{%x}", c);
		else
			out[n++] = (char)c, out[n] = 0;
	}
}

/* The subsystem whose ring receives `subsys`'s events. A kernel that groups subsystems
 * (KLOG_GROUP) defines ORACLE_LEADER before including this file, so that the oracle states the
 * grouping itself instead of reading it back from the KLogs the writer uses. */
#ifndef ORACLE_LEADER
#define ORACLE_LEADER(subsys) (subsys)
#endif

/* The ring that receives an event of `subsys` logged with `proc_dom`: its leader's in the
 * processor's set (processor modulo KLOG_PROCESSORS, DBG_MAX KLogs a set), or the first ring
 * before klogInit (while the KLog still points at the start of KLogBuffer). */
static inline int receiving_ring(int subsys, uint64_t proc_dom)
{
	int set = (int)((proc_dom >> 32) % KLOG_PROCESSORS);
	int ring = set * DBG_MAX + ORACLE_LEADER(subsys);

	return ring != 0 && KLogs[ring].buffer == KLogBuffer ? 0 : ring;
}

/* The desc word of an inline description, packed here rather than by klog.h: the first 8 bytes
 * of `text` in memory order, NUL-padded. */
static inline uint64_t oracle_inline_desc(const char *text)
{
	uint64_t word = 0;

	memcpy(&word, text, strnlen(text, sizeof(word)));
	return word;
}

/* The address of sequence number `seq` in ring `ring`. */
static inline uintptr_t record_address(int ring, int64_t seq)
{
	const KLog *log = &KLogs[ring];

	return (uintptr_t)(log->buffer + (((uint64_t)seq * KLOG_REC_SIZE) & log->buffer_size_1));
}

#endif
