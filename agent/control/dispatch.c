/* control dispatch: the requests a client has buffered, answered in
 * order. A read's requests are handled as one batch whose replies go out
 * in one write; a reply that fills the queue pauses the batch until the
 * client reads. A deferred request (one whose handler waits, e.g. for a
 * freeze) holds back the client's later requests until it is completed. */
#include "control_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "log.h"

static uint64_t next_ticket;
static control_line_fn handle_line;

void control_set_handler(control_line_fn fn)
{
    handle_line = fn;
}

static void process_batch(struct client *c);

void dispatch_lines(struct client *c)
{
    for (;;) {
        c->batch = true;
        process_batch(c);
        c->batch = false;
        if (client_dead(c) || out_pending(c) == 0 || ev_is_active(&c->wio))
            return;
        bool paused = out_pending(c) >= CLIENT_OUT_SOFT;
        if (client_flush(c) < 0)
            return;
        /* A reply over CLIENT_OUT_SOFT (a files.read chunk) paused the
         * batch and stopped reading; when the socket took it all at once
         * no write_cb will come to resume, so resume here. */
        if (!paused || client_closing(c) || out_pending(c) >= CLIENT_OUT_SOFT)
            return;
    }
}

static void process_batch(struct client *c)
{
    const char *line;
    size_t len;
    bool drained = false;

    while (!client_closing(c) && !c->deferred && out_pending(c) < CLIENT_OUT_SOFT) {
        int r = linebuf_next(&c->in, &line, &len);
        if (r == 0) {
            drained = true;
            linebuf_shrink(&c->in);
            client_in_account(c);
            break;
        }
        if (r < 0) {
            log_warn("control client %s: request longer than %d bytes", c->peer, RPC_MAX_LINE);
            client_close_with_error(c, RPC_INVALID_REQUEST, "request longer than 1048576 bytes");
            return;
        }
        size_t n = 0;
        char small[512];
        char *reply = handle_line(c, line, len, &n, small, sizeof(small));
        if (reply) {
            int rc = client_send(c, reply, n);
            if (reply != small)
                free(reply);
            if (rc < 0)
                return;
        }
        if (c->subscribe_pending) {
            c->subscribe_pending = false;
            control_subscribe(c, c->subscribe_since);
        }
    }
    if (client_dead(c) || client_closing(c))
        return;
    if (c->state == CLIENT_HALF_CLOSED) {
        /* Half-closed: every request asked has been answered; close once
         * the replies are out. */
        if (drained) {
            client_set_state(c, CLIENT_CLOSING);
            if (out_pending(c) == 0)
                client_drop(c, NULL);
        }
        return;
    }
    client_set_reading(c, out_pending(c) < CLIENT_OUT_SOFT && linebuf_space(&c->in) > 0);
}

uint64_t control_defer(struct client *c)
{
    c->deferred = ++next_ticket;
    c->deferred_has_id = false;
    return c->deferred;
}

bool control_is_deferring(const struct client *c) { return c && c->deferred && !c->deferred_has_id; }

void control_defer_id(struct client *c, cJSON *id)
{
    c->deferred_id = id;
    c->deferred_has_id = true;
}

/* The client still waiting on ticket, or NULL when it went away. */
static struct client *deferring_client(uint64_t ticket)
{
    for (size_t i = 0; ticket && i < CONTROL_SLOTS; i++)
        if (control_clients[i] && control_clients[i]->deferred == ticket &&
            !client_dead(control_clients[i]))
            return control_clients[i];
    return NULL;
}

/* Sends the reply line that completes c's deferred request (none when
 * it is NULL: out of memory), then answers what waited. */
static void complete_with(struct client *c, char *reply, size_t n)
{
    bool notification = !c->deferred_id;
    cJSON_Delete(c->deferred_id);
    c->deferred_id = NULL;
    c->deferred = 0;
    if (reply && !notification && client_send(c, reply, n) < 0) {
        free(reply);
        return;
    }
    free(reply);
    /* Requests that arrived meanwhile are answered now, in order. */
    dispatch_lines(c);
}

void control_complete(uint64_t ticket, cJSON *result, struct rpc_error *err)
{
    struct client *c = deferring_client(ticket);

    if (!c) {
        /* The client went away while it waited: nobody to tell. */
        cJSON_Delete(result);
        if (err) {
            cJSON_Delete(err->data);
            err->data = NULL;
        }
        return;
    }
    size_t n = 0;
    char *reply;
    if (result)
        reply = rpc_format_result(c->deferred_id, result, &n);
    else
        reply = rpc_format_error(c->deferred_id, err ? err->code : RPC_INTERNAL_ERROR,
                                 err ? err->message : "internal error", err ? err->data : NULL, &n);
    if (err)
        err->data = NULL;
    complete_with(c, reply, n);
}

bool control_complete_text(uint64_t ticket, const char *json, size_t len)
{
    struct client *c = deferring_client(ticket);

    if (!c)
        return true;
    size_t n = 0;
    char *reply = rpc_format_result_text(c->deferred_id, json, len, &n);
    if (!reply)
        return false;
    complete_with(c, reply, n);
    return true;
}
