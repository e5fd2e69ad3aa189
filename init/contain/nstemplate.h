/* nstemplate: one mount namespace kept to be copied. A child that has
 * set its mount namespace up sends it to hearth (SCM_RIGHTS over a socket
 * pair, before its exec); later children whose set-up would be the same
 * enter it and unshare a copy (setns, unshare: two calls instead of the
 * set-up's mounts, and a namespace of their own). What "the same" means is
 * the caller's: an opaque key, and paths whose identity (device and inode)
 * must still be what it was when the namespace was built, for the mounts
 * the template holds on them to cover them. contain.c is the one user: its
 * key is a plan's hidden and read-only paths, its paths the hidden ones. */
#ifndef HEARTH_NSTEMPLATE_H
#define HEARTH_NSTEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#define NSTEMPLATE_PATHS_MAX 12

/* Parent: the template's descriptor when it was built for key and every
 * path is still the one it was then, else -1. */
int nstemplate_for(const char *key, size_t key_len, const char *const *paths, size_t n);
/* Parent, before a fork: asks for the child's namespace under key (the
 * paths' identities noted now). Returns the child's end of the socket,
 * or -1 when a request is pending already or it cannot be made. */
int nstemplate_offer(const char *key, size_t key_len, const char *const *paths, size_t n);
/* Parent, after that fork: closes its copy of the child's end (-1: none);
 * forked false drops the request. */
void nstemplate_forked(int child_end, bool forked);
/* Parent, once that child has exec'd or ended: what it sent, if
 * anything, becomes the template, when keep (asked only then) says so. */
void nstemplate_take(bool (*keep)(void));

/* Child: enter the template and unshare a copy of it. 1: done; 0: it
 * could not be entered (still in hearth's namespace); -1 with errno:
 * entered but not copied (the child must not stay in it). */
int nstemplate_copy(int ns_fd);
/* Child, after setting its namespace up: sends it on sock. A failure
 * only means no template from this start. */
void nstemplate_send(int sock);

#endif
