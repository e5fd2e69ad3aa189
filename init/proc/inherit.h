/* inherit: what a child PID 1 forks without exec'ing (a walk, a copy, a
 * sync, a disk probe) keeps of PID 1's descriptors. */
#ifndef HEARTH_INHERIT_H
#define HEARTH_INHERIT_H

/* Closes every descriptor from 3 up except keep (-1: none) and the log's.
 * Such a child can outlive its deadline stuck in the kernel on a hung
 * share: holding a control client's socket it would hide that client's
 * close from the host, holding the virtio-serial port (one opener at a
 * time) it would keep hearth from reopening it. */
void inherit_close_all_but(int keep);
/* The same with two kept descriptors (either may be -1). */
void inherit_close_all_but2(int keep1, int keep2);
void inherit_close_all_but3(int keep1, int keep2, int keep3);

#endif
