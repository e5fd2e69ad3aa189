/* kfile: the small text files the kernel makes (/proc, /sys, cgroupfs),
 * which give their whole content to one read and take a value in one
 * write. */
#ifndef HEARTH_KFILE_H
#define HEARTH_KFILE_H

#include <sys/types.h>

/* Reads path into buf with one read of at most len - 1 bytes and ends it
 * with a NUL. Returns the bytes read (0 for an empty file), or -1 with
 * errno. */
ssize_t kfile_read(const char *path, char *buf, size_t len);

/* Writes text to path in one write, as a shell's ">" does (O_TRUNC:
 * ignored by /proc, /sys and cgroupfs, a plain file is rewritten whole):
 * those files take a value in one write, and some (a user namespace's
 * maps) only once. Returns 0, or -1 with errno (EIO for a short write). */
int kfile_write(const char *path, const char *text);

#endif
