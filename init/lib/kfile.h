/* kfile: the small text files the kernel makes (/proc, /sys, cgroupfs),
 * which give their whole content to one read. */
#ifndef HEARTH_KFILE_H
#define HEARTH_KFILE_H

#include <sys/types.h>

/* Reads path into buf with one read of at most len - 1 bytes and ends it
 * with a NUL. Returns the bytes read (0 for an empty file), or -1 with
 * errno. */
ssize_t kfile_read(const char *path, char *buf, size_t len);

#endif
