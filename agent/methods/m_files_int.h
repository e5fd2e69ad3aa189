/* m_files' inside, shared by m_files.c (path handling and the reading
 * methods) and m_files_write.c (the methods that change the tree). */
#ifndef HEARTH_M_FILES_INT_H
#define HEARTH_M_FILES_INT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct client;
struct cJSON;
struct rpc_error;

/* A path parameter: the text as given (for messages) and the same path
 * relative to "/" for safepath ("." for "/" itself). */
struct fpath {
    const char *param; /* "path", "from", "to" */
    const char *abs;
    char rel[PATH_MAX];
};

/* Reads the absolute path parameter name into p; checked for ".." and
 * component length. */
int m_files_get_path(struct cJSON *params, const char *name, struct fpath *p, struct rpc_error *err);
bool m_files_is_root(const struct fpath *p);
/* "path: /a/b: why", with -32002 for a missing file; returns -1. */
int m_files_path_error(struct rpc_error *err, const struct fpath *p, int e, const char *why);
int m_files_open_root(struct rpc_error *err);
/* The parent directory of p, opened without following links, and its
 * last component in leaf (NAME_MAX + 1 bytes). */
int m_files_open_parent(const struct fpath *p, char *leaf, struct rpc_error *err);
/* Why a file of mode m is not a regular file, for an error message. */
const char *m_files_not_file(mode_t m);
/* An optional boolean parameter, false when absent. */
int m_files_param_flag(struct cJSON *params, const char *name, bool *out, struct rpc_error *err);

/* The methods' work, done at once in the calling process: in the loop for
 * paths on local filesystems, in a child for those on a share
 * (m_files_job.c decides which; the m_files_* entry points go through
 * it). They never use c. */
int m_files_stat_now(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_files_list_now(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_files_read_now(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_files_hash_now(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
int m_files_write_now(struct client *c, struct cJSON *params, struct cJSON **result,
                      struct rpc_error *err);
int m_files_rename_now(struct client *c, struct cJSON *params, struct cJSON **result,
                       struct rpc_error *err);
int m_files_mkdir_now(struct client *c, struct cJSON *params, struct cJSON **result,
                      struct rpc_error *err);
int m_files_remove_now(struct client *c, struct cJSON *params, struct cJSON **result,
                       struct rpc_error *err);

#endif
