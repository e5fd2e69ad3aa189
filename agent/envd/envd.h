/* envd: the E2B-compatible endpoint (docs/envd.md), hearth's side. The
 * HTTP and Connect parsing never runs in hearth: hearth binds the
 * listening socket itself at boot (so the port is there from the start
 * and nothing else can take it) and hands it to a process of its own
 * binary in another role (argv[0] ENVD_ARGV0, agent/envd/envd_role.c), with
 * the ends of ENVD_LINKS socket pairs. Each link is a control client
 * (control_attach) limited to the exec.* and files.* methods, so every
 * command and file operation of the endpoint goes through the same code,
 * containment, users, limits, output rings and activity accounting as
 * the host's own. hearth supervises the role process: restarted with a
 * backoff when it ends, killed with hearth. */
#ifndef HEARTH_ENVD_H
#define HEARTH_ENVD_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct cJSON;
struct client;
struct rpc_error;

#define ENVD_ARGV0 "hearth-envd"
/* Links between hearth and the role process: calls that wait (an
 * exec.input held by a full pipe, a files.* call on a share) hold up
 * only the calls queued behind them on their own link. */
#define ENVD_LINKS 4
/* The descriptors the role process finds: the listener, the links, then
 * the inotify instance whose watches hearth adds (envd.watch) and whose
 * events the role reads (a directory the role, as nobody, could not
 * watch itself). */
#define ENVD_LISTEN_FD 3
#define ENVD_LINK_FD0 4
#define ENVD_WATCH_FD (ENVD_LINK_FD0 + ENVD_LINKS)

/* Binds the listener when the config has an `envd` section: before any
 * service starts, so none can take the port. A failure is logged, kept
 * for status and retried by envd_start. */
void envd_listen(const struct config *cfg);
/* Starts the role process (after the control plane is up). */
void envd_start(const struct config *cfg);
/* Shutdown: the role process is ended and not restarted. */
void envd_stop(void);
/* sandbox.init's envd.access_token: the token every call but /health
 * must then carry (X-Access-Token); handed to the running role process. */
void envd_set_token(const char *token);
bool envd_enabled(void);
/* The running role process's inotify instance (hearth's copy), -1 when
 * there is none. */
int envd_watch_fd(void);
/* envd.watch, for the role process's links only: a watch on a directory
 * added to its inotify instance (m_files_watch); -32601 for anyone else. */
int envd_method_watch(struct client *c, struct cJSON *params, struct cJSON **result,
                      struct rpc_error *err);
/* envd.init, for the role process's links only: envd's POST /init (the
 * token rule checked here, with what the request presented), the token,
 * default user and directory and the variables added to every process
 * kept by hearth (so a role process started again has them) and sent to
 * the role; -32601 for anyone else. */
int envd_method_init(struct client *c, struct cJSON *params, struct cJSON **result,
                     struct rpc_error *err);
/* status.envd: listen, state, pid, restarts, error; NULL when off. */
struct cJSON *envd_status_json(void);

/* The role process (agent/envd/envd_role.c): main when argv[0] is ENVD_ARGV0. */
int envd_role_main(int argc, char **argv);

#endif
