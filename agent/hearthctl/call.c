/* hearthctl calls: send a line, read lines until the reply with our id,
 * keeping any notifications (event, log) that arrive first so the follow
 * modes lose none of them. One request at a time, but for cp, which sends
 * one more before reading a reply (call_send, call_recv: replies come in
 * request order). */
#include "ctl.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"

static void on_sigint(int sig)
{
    (void)sig;
    base_got_sigint = 1;
}

/* Parse one whole line as JSON; NULL if it is not exactly one value. */
static cJSON *parse_line(const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, len + 1, &end, 1);

    /* end == line + len rejects an embedded NUL followed by junk. */
    if (j && end != line + len) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static bool is_notification(const cJSON *msg)
{
    return !cJSON_HasObjectItem(msg, "id") && print_jstr(msg, "method") != NULL;
}

static void queue_note(struct ctl *t, cJSON *msg, size_t bytes)
{
    struct note *n;

    if (t->notes_bytes + bytes > NOTES_MAX_BYTES) {
        t->notes_dropped++;
        cJSON_Delete(msg);
        return;
    }
    n = calloc(1, sizeof(*n));
    if (!n)
        base_die_oom();
    n->msg = msg;
    *t->notes_tail = n;
    t->notes_tail = &n->next;
    t->notes_bytes += bytes;
}

static void print_server_error(const struct ctl *t, const cJSON *err)
{
    const char *msg = print_jstr(err, "message");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(err, "data");
    double code;

    fprintf(stderr, "hearthctl: unable to call %s: ", t->method);
    base_put_safe(stderr, msg ? msg : "(no message)");
    if (print_jnum(err, "code", &code) && fabs(code) < 9e15)
        fprintf(stderr, " (code %lld)", (long long)code);
    fputc('\n', stderr);
    if (data && !cJSON_IsNull(data)) {
        char *s = cJSON_IsString(data) ? NULL : cJSON_PrintUnformatted(data);

        fputs("hearthctl:   data: ", stderr);
        if (cJSON_IsString(data))
            base_put_safe(stderr, data->valuestring);
        else if (s)
            base_put_safe(stderr, s);
        fputc('\n', stderr);
        cJSON_free(s);
    }
}

int call_send(struct ctl *t, cJSON *params, struct call *k)
{
    cJSON *req = cJSON_CreateObject();
    double id = ++t->next_id;
    char *text;
    size_t tlen;
    int64_t deadline, t0;
    enum io r;

    if (!req || !params || !cJSON_AddStringToObject(req, "jsonrpc", "2.0") ||
        !cJSON_AddNumberToObject(req, "id", id) ||
        !cJSON_AddStringToObject(req, "method", t->method))
        base_die_oom();
    if (!cJSON_AddItemToObject(req, "params", params))
        base_die_oom();
    /* jsonout (as hearth writes its replies) rather than cJSON's printer:
     * the same request, in a fraction of the time over a long string (a
     * file chunk's base64). */
    text = jsonout_print(req);
    cJSON_Delete(req);
    if (!text)
        base_die_oom();
    tlen = strlen(text);
    if (tlen + 1 > REQUEST_MAX) {
        fprintf(stderr, "hearthctl: %s: request is %zu bytes, over the 1 MiB limit\n",
                t->method, tlen + 1);
        cJSON_free(text);
        return EXIT_USAGE;
    }
    deadline = conn_deadline_after(t->timeout_ms);
    t0 = mono_ns();
    /* The terminating NUL becomes the line's newline: one send. */
    text[tlen] = '\n';
    r = conn_write(&t->conn, text, tlen + 1, deadline);
    cJSON_free(text);
    if (r != IO_OK) {
        if (r == IO_TIMEOUT)
            fprintf(stderr, "hearthctl: timed out after %d ms sending %s to %s\n",
                    t->timeout_ms, t->method, t->conn.spec);
        else
            fprintf(stderr, "hearthctl: unable to send to %s: %s\n", t->conn.spec,
                    strerror(errno));
        return EXIT_USAGE;
    }
    k->id = id;
    k->deadline = deadline;
    k->t0 = t0;
    return 0;
}

int call_recv(struct ctl *t, const struct call *k, cJSON **reply, const cJSON **result)
{
    double id = k->id;
    int64_t deadline = k->deadline, t0 = k->t0;
    char *line;
    size_t llen;
    enum io r;

    for (;;) {
        cJSON *msg;
        const cJSON *jid, *res, *err;

        r = conn_read_line(&t->conn, deadline, LINE_MAX_BYTES, &line, &llen);
        switch (r) {
        case IO_OK:
            break;
        case IO_TIMEOUT:
            fprintf(stderr, "hearthctl: timed out after %d ms waiting for the %s reply from %s\n",
                    t->timeout_ms, t->method, t->conn.spec);
            return EXIT_USAGE;
        case IO_EOF:
            fprintf(stderr, "hearthctl: %s closed the connection before the %s reply\n",
                    t->conn.spec, t->method);
            return EXIT_USAGE;
        case IO_TOOLONG:
            return base_bad_reply(t, "line longer than 16 MiB");
        case IO_INTR:
            return EXIT_USAGE;
        default:
            fprintf(stderr, "hearthctl: unable to read from %s: %s\n", t->conn.spec,
                    strerror(errno));
            return EXIT_USAGE;
        }
        if (llen == 0)
            continue;
        msg = parse_line(line, llen);
        if (!msg)
            return base_bad_reply(t, "not JSON");
        if (!cJSON_IsObject(msg)) {
            cJSON_Delete(msg);
            return base_bad_reply(t, "not a JSON object");
        }
        if (is_notification(msg)) {
            const char *m = print_jstr(msg, "method");

            /* Keep only what the follow loop will print, in order. */
            if (t->follow && t->cmd && t->cmd->notify && strcmp(m, t->cmd->notify) == 0)
                queue_note(t, msg, llen);
            else
                cJSON_Delete(msg);
            continue;
        }
        jid = cJSON_GetObjectItemCaseSensitive(msg, "id");
        res = cJSON_GetObjectItemCaseSensitive(msg, "result");
        err = cJSON_GetObjectItemCaseSensitive(msg, "error");
        /* id null: the server could not read our request's id at all. */
        if (!(cJSON_IsNumber(jid) && jid->valuedouble == id) &&
            !(cJSON_IsNull(jid) && err)) {
            cJSON_Delete(msg);
            return base_bad_reply(t, "reply id does not match the request");
        }
        t->rtt_ms = (double)(mono_ns() - t0) / 1e6;
        if (res) {
            *reply = msg;
            *result = res;
            return 0;
        }
        if (cJSON_IsObject(err)) {
            if (!t->quiet)
                print_server_error(t, err);
            cJSON_Delete(msg);
            return EXIT_SERVER;
        }
        cJSON_Delete(msg);
        return base_bad_reply(t, err ? "error is not an object" : "neither result nor error");
    }
}

/* Call t->method with params (consumed). On 0, *reply is the whole reply
 * (caller deletes) and *result points into it. Otherwise the failure was
 * printed and the return value is the exit code. */
int call_method(struct ctl *t, cJSON *params, cJSON **reply, const cJSON **result)
{
    struct call k;
    int rc = call_send(t, params, &k);
    return rc ? rc : call_recv(t, &k, reply, result);
}

/* ---- following notifications ----------------------------------------- */

static int emit_note(struct ctl *t, const cJSON *msg)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const char *name = print_jstr(params, "name");

    if (t->cmd->note_by_name && name && t->arg && strcmp(name, t->arg) != 0)
        return 0;
    if (t->json)
        print_json(msg, false);
    else if (cJSON_IsObject(params))
        t->cmd->on_note(t, params);
    return print_flush_stdout();
}

/* Print notifications until the server closes or SIGINT; no timeout. */
int call_follow(struct ctl *t)
{
    struct sigaction sa;
    int rc = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint; /* no SA_RESTART: poll must return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0) {
        fprintf(stderr, "hearthctl: unable to set up signals: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    if (t->notes_dropped)
        fprintf(stderr, "hearthctl: warning: dropped %lu notifications that came before the reply\n",
                t->notes_dropped);
    while (t->notes) {
        struct note *n = t->notes;

        t->notes = n->next;
        if (rc == 0)
            rc = emit_note(t, n->msg);
        cJSON_Delete(n->msg);
        free(n);
    }
    t->notes_tail = &t->notes;
    while (rc == 0) {
        char *line;
        size_t len;
        cJSON *msg;
        enum io r = conn_read_line(&t->conn, -1, LINE_MAX_BYTES, &line, &len);

        if (r == IO_EOF || r == IO_INTR || base_got_sigint)
            break;
        if (r == IO_TOOLONG)
            return base_bad_reply(t, "line longer than 16 MiB");
        if (r != IO_OK) {
            fprintf(stderr, "hearthctl: unable to read from %s: %s\n", t->conn.spec,
                    strerror(errno));
            return EXIT_USAGE;
        }
        if (len == 0)
            continue;
        msg = parse_line(line, len);
        if (!msg)
            return base_bad_reply(t, "not JSON");
        if (cJSON_IsObject(msg) && is_notification(msg) &&
            strcmp(print_jstr(msg, "method"), t->cmd->notify) == 0)
            rc = emit_note(t, msg);
        else if (cJSON_IsObject(msg) && is_notification(msg) &&
                 strcmp(print_jstr(msg, "method"), "dropped") == 0) {
            /* The server gave up on this stream (we read too slowly, or
             * its output budget ran out): say so, do not end quietly. */
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(msg, "params");
            const char *why = print_jstr(p, "message");
            fprintf(stderr, "hearthctl: dropped by %s: ", t->conn.spec);
            base_put_safe(stderr, why ? why : "?");
            fputc('\n', stderr);
            rc = EXIT_SERVER;
        }
        cJSON_Delete(msg);
    }
    return rc;
}

void call_notes_free(struct ctl *t)
{
    while (t->notes) {
        struct note *n = t->notes;

        t->notes = n->next;
        cJSON_Delete(n->msg);
        free(n);
    }
    t->notes_tail = &t->notes;
}
