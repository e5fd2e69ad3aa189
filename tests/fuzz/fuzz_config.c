/* fuzz_config: the config loader (init/config/config.c), which turns an
 * operator- or platform-written hearth.json into typed settings and is the
 * only parser that runs before anything else in PID 1.
 *
 * The input is the document itself, passed with its length and without a
 * terminating NUL (libFuzzer's buffer is exactly size bytes), the way
 * config_parse's contract allows; ASan reports any read past its end.
 *
 * Checked beyond the sanitizers, for an accepted document:
 *   - the typed form is within its documented bounds (service and listen
 *     counts, NULL-terminated argv of argc entries, names present);
 *   - config_redacted_json replaces exactly the secret env values and
 *     leaves every other value as it was but for URL passwords;
 *   - the redacted document, printed and parsed again, is still accepted
 *     with the same shape (config.get output can be fed back);
 *   - every top-level section passes config_check_section on its own, as
 *     sandbox.init/net/egress.set receive them;
 *   - the `network` section goes through sections_network_parse, as sandbox.init
 *     and sandbox.resume receive it: accepted unless it is over their
 *     bounds (more than 16 interfaces or 8 name servers), and then typed
 *     exactly as at load (routes and neighbours on listed interfaces);
 * and for a refused one that err holds a non-empty terminated message. */
#include "config.h"
#include "err.h"
#include "redact.h"
#include "sections.h"

#include <sys/socket.h>

#include <cJSON.h>

#include "fuzz_common.h"

static void check_redaction(const struct config *cfg, const cJSON *red)
{
    const cJSON *osvc = cJSON_GetObjectItemCaseSensitive(cfg->json, "services");
    const cJSON *rsvc = cJSON_GetObjectItemCaseSensitive(red, "services");
    FUZZ_CHECK(cJSON_GetArraySize(osvc) == cJSON_GetArraySize(rsvc), "services lost in copy");
    for (int i = 0; i < cJSON_GetArraySize(osvc); i++) {
        const cJSON *oenv = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(osvc, i), "env");
        const cJSON *renv = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rsvc, i), "env");
        const cJSON *o = oenv ? oenv->child : NULL, *r = renv ? renv->child : NULL;
        for (; o && r; o = o->next, r = r->next) {
            FUZZ_CHECK(strcmp(o->string, r->string) == 0, "env key %s became %s", o->string,
                       r->string);
            FUZZ_CHECK(cJSON_IsString(r), "env %s is no longer a string", r->string);
            if (names_env_is_secret(o->string)) {
                FUZZ_CHECK(strcmp(r->valuestring, "<redacted>") == 0,
                           "secret env %s not redacted", o->string);
                continue;
            }
            /* Other values lose only their URL passwords. */
            size_t olen = strlen(o->valuestring), cap = olen * 3 + 16;
            char *want = malloc(cap);
            if (!want)
                continue;
            if (redact_text(o->valuestring, olen, want, cap) == (size_t)-1)
                snprintf(want, cap, "%s", o->valuestring);
            FUZZ_CHECK(strcmp(r->valuestring, want) == 0, "non-secret env %s became %s",
                       o->string, r->valuestring);
            free(want);
        }
        FUZZ_CHECK(!o && !r, "env of services[%d] changed length in the copy", i);
    }
}

static void check_typed(const struct config *cfg)
{
    FUZZ_CHECK(cfg->json && cJSON_IsObject(cfg->json), "accepted config without an object");
    FUZZ_CHECK(cfg->n_listen <= CONFIG_MAX_LISTEN, "%zu listen specs", cfg->n_listen);
    FUZZ_CHECK(cfg->n_services <= CONFIG_MAX_SERVICES, "%zu services", cfg->n_services);
    FUZZ_CHECK(cfg->n_allowed_cids <= 16, "%zu allowed cids", cfg->n_allowed_cids);
    for (size_t i = 0; i < cfg->n_services; i++) {
        const struct service_config *s = &cfg->services[i];
        FUZZ_CHECK(s->name && s->name[0], "services[%zu] without a name", i);
        FUZZ_CHECK(s->argv && s->argc >= 1 && s->argv[s->argc] == NULL,
                   "services[%zu] argv not NULL-terminated after %zu entries", i, s->argc);
        for (size_t j = 0; j < s->argc; j++)
            FUZZ_CHECK(s->argv[j] != NULL, "services[%zu].argv[%zu] is NULL", i, j);
        for (size_t j = 0; j < s->n_env; j++)
            FUZZ_CHECK(s->env[j].key && s->env[j].value, "services[%zu].env[%zu] empty", i, j);
        FUZZ_CHECK(s->backoff_initial_ms <= s->backoff_max_ms,
                   "services[%zu] backoff initial %lld > max %lld", i,
                   (long long)s->backoff_initial_ms, (long long)s->backoff_max_ms);
        FUZZ_CHECK(s->stop_signal > 0, "services[%zu] stop signal %d", i, s->stop_signal);
    }
}

static void check_network(const struct config *cfg, const cJSON *net)
{
    static struct network_cfg n;
    struct err err;
    const struct network_cfg *c = &cfg->network;
    bool over = c->n_ifs + c->n_dropped > NETWORK_USED_IFACES || c->n_dns > NETWORK_USED_DNS;
    int rc = sections_network_parse(net, &n, &err);
    FUZZ_CHECK((rc == 0) == !over, "sections_network_parse %s a section the config %s: %s",
               rc == 0 ? "accepted" : "refused", "accepted", rc == 0 ? "" : err.msg);
    if (rc < 0) {
        FUZZ_CHECK(strncmp(err.msg, "network.", 8) == 0, "error does not name the field: %s", err.msg);
        return;
    }
    FUZZ_CHECK(n.n_ifs == c->n_ifs && n.n_routes == c->n_routes && n.n_neighs == c->n_neighs &&
                   n.n_dns == c->n_dns,
               "sections_network_parse typed the section differently from the load");
    FUZZ_CHECK(n.n_routes <= NETWORK_MAX_ROUTES && n.n_neighs <= NETWORK_MAX_NEIGHS,
               "%zu routes, %zu neighbours", n.n_routes, n.n_neighs);
    for (size_t i = 0; i < n.n_routes; i++) {
        bool listed = false;
        for (size_t k = 0; k < n.n_ifs; k++)
            listed = listed || strcmp(n.ifs[k].name, n.routes[i].dev) == 0;
        FUZZ_CHECK(listed, "routes[%zu].dev %s is not an interface", i, n.routes[i].dev);
        FUZZ_CHECK(n.routes[i].fam == AF_INET || n.routes[i].fam == AF_INET6,
                   "routes[%zu] family %d", i, n.routes[i].fam);
        FUZZ_CHECK(n.routes[i].dst_len <= (n.routes[i].fam == AF_INET ? 32 : 128),
                   "routes[%zu] prefix %d", i, n.routes[i].dst_len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err err;
    struct config *cfg;

    memset(err.msg, 'X', sizeof(err.msg));
    cfg = config_parse((const char *)data, size, &err);
    if (!cfg) {
        FUZZ_CHECK(memchr(err.msg, '\0', sizeof(err.msg)) != NULL, "err not terminated");
        FUZZ_CHECK(err.msg[0], "refused without a message");
        return 0;
    }
    check_typed(cfg);

    cJSON *red = config_redacted_json(cfg);
    FUZZ_CHECK(red != NULL, "config_redacted_json returned NULL");
    check_redaction(cfg, red);

    char *text = cJSON_PrintUnformatted(red);
    FUZZ_CHECK(text != NULL, "redacted copy does not print");
    struct config *again = config_parse(text, strlen(text), &err);
    FUZZ_CHECK(again != NULL, "printed redacted config refused: %s\n  text: %.400s", err.msg, text);
    FUZZ_CHECK(again->n_services == cfg->n_services && again->n_listen == cfg->n_listen &&
                   again->n_modules == cfg->n_modules &&
                   again->n_allowed_cids == cfg->n_allowed_cids,
               "round trip changed the shape");
    FUZZ_CHECK((!again->hostname && !cfg->hostname) ||
                   (again->hostname && cfg->hostname &&
                    strcmp(again->hostname, cfg->hostname) == 0),
               "round trip changed the hostname");
    config_free(again);
    free(text);
    cJSON_Delete(red);

    for (const cJSON *sec = cfg->json->child; sec; sec = sec->next) {
        int rc = config_check_section(sec->string, sec, &err);
        FUZZ_CHECK(rc == 0, "section %s accepted in the document but not alone: %s",
                   sec->string, err.msg);
    }
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(cfg->json, "network");
    if (net)
        check_network(cfg, net);
    config_free(cfg);
    return 0;
}
