// SPDX-License-Identifier: GPL-2.0
/*
 * A small kernel module for symbols' tests: built with Kbuild against the installed kernel
 * headers, then opened at chosen section addresses and compared with gdb's add-symbol-file.
 * Globals in .data, .bss, .rodata and __initdata; functions in .text, .exit.text and
 * .init.text; a struct with bit-fields, a union, an enum and a two-dimensional array.
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>

enum ko_level { KO_QUIET = 0, KO_LOUD = 3, KO_SHOUT = -1 };

struct ko_record {
	u64 stamp;
	u32 id : 12;
	u32 level : 4;
	enum ko_level kind;
	const char *text;
	struct ko_record *next;
	union {
		u8 bytes[24];
		u64 words[3];
	} payload;
};

struct ko_record ko_records[4] = { { .stamp = 1, .id = 7, .level = 3, .text = "first" } };
EXPORT_SYMBOL(ko_records);
u16 ko_grid[3][5];
static int ko_counter = 42;
static struct ko_record *ko_head;
const char ko_banner[] = "kotest";
static int ko_initdata __initdata = 5;

static noinline int ko_bump(int by)
{
	ko_counter += by;
	ko_head = &ko_records[ko_counter & 3];
	ko_grid[ko_counter % 3][by & 3]++;
	return ko_counter;
}

int ko_exported(int x)
{
	return ko_bump(x) * 2 + ko_head->id;
}
EXPORT_SYMBOL(ko_exported);

static int __init kotest_init(void)
{
	pr_info("%s %d\n", ko_banner, ko_bump(ko_initdata));
	return 0;
}

static void __exit kotest_exit(void)
{
	ko_bump(-1);
}

module_init(kotest_init);
module_exit(kotest_exit);
MODULE_LICENSE("GPL");
