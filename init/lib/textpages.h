/* textpages: hearth's own code pages, given back once start-up is done.
 *
 * The kernel maps a file's pages in around each one a fault asks for
 * (fault-around, 64 KiB), so the start-up's walk through config parsing,
 * machine setup and the first services leaves nearly all of the binary's
 * text mapped: ~480 KiB of RSS, most of it code an idle hearth never runs
 * again. Dropping the mapping's pages (MADV_DONTNEED: the text is never
 * written, so nothing is lost; the pages stay in the page cache) lets the
 * loop fault back what it uses, and leaves the rest unmapped, where the
 * kernel may reclaim it under pressure instead of keeping it as a mapped
 * executable page. Like the kernel freeing its __init memory after boot. */
#ifndef HEARTH_TEXTPAGES_H
#define HEARTH_TEXTPAGES_H

struct err;

/* Drops this process's mapping of its read-only segment (code and
 * constants). Returns 0, or -1 with e set. */
int textpages_release(struct err *e);

#endif
