/* mounts: the configured filesystems (`mounts`, then the entries derived
 * from `host_mounts`), applied one after the other in the listed order so
 * nested mounts work. A source that is not there yet (a hot-plugged
 * virtio-fs tag, a block device, a bind source) is retried with a
 * backoff on a monotonic timer until the mount's timeout, without
 * blocking the loop. A mount that is already in place is left alone.
 *
 * Platform mounts (type "platform") are made by someone else after
 * hearth started, or before (a container runtime's -v): hearth watches
 * the mount table for them (mountinfo_watch) and reports each that
 * appears, goes or is replaced ("mount.changed"), and one that is late.
 *
 * A mount with an owner has its root given to it in a child (the share
 * may hang): until that answers it is "owning", not usable.
 *
 * Owns the phase "mounts": reached once every required mount is in,
 * every required platform mount is there, and the homes on them are
 * seeded (seeding and the skills overlay wait for the platform's mounts
 * too); a required failure keeps it unreached (services after "mounts"
 * are held), is kept in status and emitted as a "mount.failed" event. A
 * required platform mount that goes or is replaced revokes it
 * (gate_revoke: the services on it are stopped) until it is back and
 * seeded. */
#ifndef HEARTH_MOUNTS_H
#define HEARTH_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct config;
struct cJSON;
struct host_mounts_cfg;

#define MOUNTS_MAX 128
/* Where the shared tag of host_mounts_rule "subpath" mode is mounted. */
#define MOUNTS_SHARE_DIR "/run/hearth/shares"

/* Builds the list from the config (mounts, then host_mounts) and starts
 * applying it; done() is called each time a pass over the list ends
 * (seeding and skills follow it), and the phase "mounts" then waits for
 * mounts_phase_ready(). Without done, the phase is marked at once. */
void mounts_start(const struct config *cfg, void (*done)(void));
/* fn(target, why) for each platform mount that was there and went or
 * was replaced (why: "platform mount T gone"), after the phase is
 * revoked: the work under way beneath it (a seed copy, a skills walk)
 * must stop, not go on writing into what it hid. Set before
 * mounts_start. */
void mounts_on_left(void (*fn)(const char *target, const char *why));
/* Marks the phase "mounts" reached if the last pass ended with every
 * required mount in (called once seeding is through). */
void mounts_phase_ready(void);

/* Replaces the entries that came from host_mounts with hm's (parsed by
 * sections_host_mounts_parse) and applies the list again. */
void mounts_apply_host(const struct host_mounts_cfg *hm);
/* sections_host_mounts_parse, then mounts_apply_host: a host_mounts value (the
 * platform's JSON array string, or the array itself). On error nothing
 * changes and err names the field. */
int mounts_set_host(const struct cJSON *host_mounts, struct err *err);

/* After a resume: stats every mounted target and remounts those that are
 * gone or stale (ENOTCONN, ESTALE, EIO). Returns how many were remounted,
 * or -1 with err when one of them could not be. */
int mounts_recheck(struct err *err);

/* syncfs on every mounted, writable, persistent (not tmpfs) mount, before
 * a freeze. Returns the count, or -1 when one failed. */
int mounts_sync(void);

/* The target of a failed mount that path lies at or under, else NULL. */
const char *mounts_path_failed(const char *path);
/* Why path cannot be written now: "mount T failed", or "the platform
 * mount at T is not there" (nothing may land in the image's directory
 * it will hide); NULL when it can. The text lives until the next call. */
const char *mounts_path_blocked(const char *path);
/* One configured mount, for readers such as diskuse. */
struct mounts_entry {
    const char *target, *type; /* valid until the list changes */
    bool read_only, mounted;
};
/* The i-th mount in list order; -1 past the end. */
int mounts_entry(size_t i, struct mounts_entry *out);
/* Whether the last pass has finished. */
bool mounts_done(void);

/* mounts.list: {"mounts": [{source, target, type, read_only, required,
 * state, error, attempts, from, mount_id, mounted_from; for platform
 * mounts late, changes, last_change, last_change_ms, waiting_ms}],
 * "done", "failed"}. */
struct cJSON *mounts_list_json(void);
/* A short summary for status: {"done", "mounted", "failed", "error",
 * "waiting", "waiting_for", "late", "owning"}. */
struct cJSON *mounts_status_json(void);

/* Parses the mount options string: flags (ro, nosuid, nodev, noexec,
 * noatime, ...) into *flags, the rest into data (comma-separated).
 * Returns -1 when data does not fit. Exposed for unit tests. */
int mounts_parse_options(const char *opts, unsigned long *flags, char *data, size_t datalen);

/* Where a host_mounts entry comes from under a rule: tag-per-share gives
 * prefix + the last component of hostPath; subpath gives
 * MOUNTS_SHARE_DIR/tag + the remainder of hostPath under host_root.
 * Exposed for unit tests. */
int mounts_host_source(const char *mode, const char *tag, const char *host_root,
                       const char *host_path, char *out, size_t outlen);

#endif
