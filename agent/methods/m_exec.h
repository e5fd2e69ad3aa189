/* m_exec: processes started by the host — exec.start, exec.input,
 * exec.resize, exec.signal, exec.wait, exec.list, exec.attach
 * (registered in methods.c). Params are read and checked here, every
 * refusal naming its field; the process table is agent/execproc. */
#ifndef HEARTH_M_EXEC_H
#define HEARTH_M_EXEC_H

#include "methods.h"

#define EXEC_WAIT_DEFAULT_MS 60000
#define EXEC_WAIT_MAX_MS (24 * 3600 * 1000)

int m_exec_start(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_exec_input(struct client *c, struct cJSON *params, struct cJSON **result,
                 struct rpc_error *err);
int m_exec_resize(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_exec_signal(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);
int m_exec_wait(struct client *c, struct cJSON *params, struct cJSON **result,
                struct rpc_error *err);
int m_exec_list(struct client *c, struct cJSON *params, struct cJSON **result,
                struct rpc_error *err);
int m_exec_attach(struct client *c, struct cJSON *params, struct cJSON **result,
                  struct rpc_error *err);

#endif
