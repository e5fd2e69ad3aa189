/* m_files: file access for the host over the control plane —
 * files.stat, files.list, files.read, files.write, files.rename,
 * files.mkdir, files.remove, files.hash (registered in methods.c).
 *
 * Every path is absolute and resolved from "/" without following a
 * symbolic link (safepath), unless the read-only methods are given
 * "follow": true. Every call does a bounded amount of work (a chunk, a
 * page of entries, a hashed range, a number of removals), so a transfer
 * of any size is a sequence of short calls and never stalls the loop.
 *
 * A call whose paths may reach a share (9p, virtio-fs, FUSE, NFS: see
 * fsclass.h) runs in a child process with the files.timeout_ms deadline
 * and is answered later (m_files_job.c), so a stalled file server blocks
 * that child, never PID 1. */
#ifndef HEARTH_M_FILES_H
#define HEARTH_M_FILES_H

#include "methods.h"

#define FILES_CHUNK_MAX (256 * 1024)       /* files.read / files.write bytes per call */
#define FILES_LIST_MAX 1000                /* files.list entries per call */
#define FILES_HASH_MAX (1024 * 1024)       /* files.hash bytes per call (~10 ms of SHA-256) */
#define FILES_REMOVE_MAX 2000              /* files.remove entries per recursive call */
#define FILES_REMOVE_DEPTH 64              /* directory levels a recursive remove descends */
/* Calls on shares running at once in children, over all clients (each
 * client has at most one: its later requests wait for the reply). A
 * child killed at its deadline but still held by the kernel keeps its
 * slot until it is gone. */
#define FILES_JOBS_MAX 8

int m_files_stat(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_files_list(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_files_read(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_files_hash(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_files_write(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_files_rename(struct client *c, struct cJSON *params, struct cJSON **result,
                   struct rpc_error *err);
int m_files_mkdir(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_files_remove(struct client *c, struct cJSON *params, struct cJSON **result,
                   struct rpc_error *err);
/* envd.watch's work, routed like files.stat (a path that may reach a
 * share is handled in a child): now does it (in the loop or in that
 * child), keep names the descriptor of the loop's that the child must
 * keep open (the envd role process's inotify instance). Both are envd's
 * (agent/envd/envd.c checks the caller and owns the instance), handed
 * down so this layer never calls up into it. */
int m_files_watch(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err,
                  int (*now)(struct client *c, struct cJSON *params, struct cJSON **result,
                             struct rpc_error *err),
                  int (*keep)(void));

#endif
