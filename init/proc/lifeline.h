/* lifeline: every process hearth forks dies with hearth. Where hearth is
 * not PID 1 (a container's entrypoint in a pid namespace another init
 * owns), its death ends nothing by itself: its children would be handed
 * to that init and run on, unsupervised and outside the egress policy
 * whose ruleset dies with hearth's netlink socket. So each child asks for
 * SIGKILL at its parent's death (PR_SET_PDEATHSIG) and then checks that
 * hearth had not already gone before it asked.
 *
 * The kernel sends that signal when the parent *thread* exits (hearth
 * has one) and clears the request at a fork, at a change of the effective
 * or filesystem ids, at a growth of the permitted capabilities, and at a
 * set-user-ID or file-capability exec: hence lifeline_hold again after
 * each credential change, and in the reaper of a service's pid namespace
 * after its exec (pidreaper.c). A pid namespace ends when its first
 * process does, so the reaper's lifeline covers all it holds. */
#ifndef HEARTH_LIFELINE_H
#define HEARTH_LIFELINE_H

/* Once, in hearth, before the first fork: its pid, and a pidfd of itself
 * for children whose parent is out of their sight (a child born in a pid
 * namespace of its own reads a parent pid of 0). Returns 0, or -1 with
 * errno when no pidfd could be opened (then such a child cannot check). */
int lifeline_init(void);

/* hearth's pidfd (close-on-exec), or -1. */
int lifeline_fd(void);

/* In a child of hearth, between fork and exec (async-signal-safe): asks
 * for SIGKILL at hearth's death, then _exit(127) if hearth is gone
 * already (the child was handed to another parent, or hearth's pidfd
 * says it exited). */
void lifeline_hold(void);

/* The same after an exec, with the pidfd that crossed it (closed here:
 * nothing after this check needs a handle on hearth). */
void lifeline_hold_fd(int pidfd);

#endif
