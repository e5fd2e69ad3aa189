/* nstemplate: the mount namespace template. Every contained start
 * builds the same mount namespace (the /dev, the masks, the read-only
 * binds: about half a millisecond of mount calls), since what it hides
 * and makes read-only comes from hearth's config, not from the service.
 * hearth keeps one such namespace, built by a child, and each later start
 * of a plan with the same hidden and read-only paths copies it (setns,
 * then unshare: two calls, a namespace of its own).
 *
 * The template is only taken from a child that cannot change its own
 * mounts (no CAP_SYS_ADMIN), and only kept where hearth's later mounts
 * propagate into it as they do into a running service's namespace. A
 * hidden directory made anew since (another inode) makes the template
 * stale for that start, which builds afresh and offers its namespace. */
#ifndef HEARTH_NSTEMPLATE_H
#define HEARTH_NSTEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "contain.h"

/* Parent, from contain_prepare: the template's descriptor when it fits
 * this plan (its key and its hidden directories' inodes), else -1. */
int nstemplate_for(const struct contain_plan *p);
/* Parent, before the fork: asks this start's child to send its namespace
 * back once built (p->snap_fd), when none fits and none is pending.
 * Returns whether it asked. */
bool nstemplate_offer(struct contain_plan *p);
/* Parent, after the fork: its copy of the child's end closed; forked
 * false drops the request. */
void nstemplate_forked(struct contain_plan *p, bool forked);
/* Parent, once the asked child has exec'd or ended: the namespace it
 * sent, if any, becomes the template. */
void nstemplate_take(void);

/* Child: enter the template and unshare a copy of it. 1: done; 0: it
 * could not be entered (the caller builds as usual, still in hearth's
 * namespace); -1 with what and errno: entered but not copied (the child
 * must not stay in it). */
int nstemplate_copy(int ns_fd, char *what, size_t len);
/* Child, after building its namespace: sends it to the parent. A failure
 * only means no template from this start. */
void nstemplate_send(int sock);

#endif
