#include "egress.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cJSON.h>

#include "cidr.h"
#include "config.h"
#include "events.h"
#include "log.h"
#include "nft.h"
#include "service.h"

/* Bound on one list: 10,000 is the benchmarked size; far beyond it the
 * batch stops being cheap and the request line limit is near anyway. */
#define EGRESS_MAX_CIDRS 65536

/* Always in denyOut: "internet access" does not cover private ranges. */
static const char *const default_deny[] = {"10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16",
                                           "172.16.0.0/12", "192.168.0.0/16", "fc00::/7",
                                           "fe80::/10"};

static struct {
    cJSON *policy;              /* normalised, as last applied (or attempted at boot) */
    bool applied;
    char error[256];
    struct nft_expect exp;
    uint32_t genid;
    struct cidr always[64];     /* gateways and DNS servers */
    size_t n_always;
    unsigned repairs;
} E;

struct parsed {
    struct cidr *allow, *deny;
    size_t n_allow, n_deny;
    bool allow_public;
};

static void parsed_free(struct parsed *p)
{
    free(p->allow);
    free(p->deny);
}

static int parse_list(const cJSON *arr, const char *key, struct cidr **out, size_t *n,
                      size_t extra, char *err, size_t errlen)
{
    size_t cnt = arr ? (size_t)cJSON_GetArraySize(arr) : 0;
    if (cnt > EGRESS_MAX_CIDRS) {
        snprintf(err, errlen, "egress.%s: %zu entries, at most %d", key, cnt, EGRESS_MAX_CIDRS);
        return -1;
    }
    *out = calloc(cnt + extra + 1, sizeof(**out));
    if (!*out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        char reason[128];
        /* Already schema-checked: this only fails on an internal mismatch. */
        if (cidr_parse(it->valuestring, false, &(*out)[*n], reason, sizeof(reason)) < 0) {
            snprintf(err, errlen, "egress.%s[%zu]: bad CIDR \"%s\": %s", key, *n, it->valuestring,
                     reason);
            return -1;
        }
        (*n)++;
    }
    return 0;
}

static int parse_policy(const cJSON *policy, struct parsed *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (!cJSON_IsObject(policy)) {
        snprintf(err, errlen, "egress: expected object");
        return -1;
    }
    if (config_check_section("egress", policy, err, errlen) < 0)
        return -1;
    const cJSON *pub = cJSON_GetObjectItemCaseSensitive(policy, "allowPublicTraffic");
    p->allow_public = pub ? cJSON_IsTrue(pub) : true;
    size_t nd = sizeof(default_deny) / sizeof(default_deny[0]);
    if (parse_list(cJSON_GetObjectItemCaseSensitive(policy, "allowOut"), "allowOut", &p->allow,
                   &p->n_allow, 0, err, errlen) < 0 ||
        parse_list(cJSON_GetObjectItemCaseSensitive(policy, "denyOut"), "denyOut", &p->deny,
                   &p->n_deny, nd, err, errlen) < 0) {
        parsed_free(p);
        return -1;
    }
    for (size_t i = 0; i < nd; i++)
        if (cidr_parse(default_deny[i], false, &p->deny[p->n_deny], NULL, 0) == 0)
            p->n_deny++;
    return 0;
}

/* The policy as stored and reported: every field present. */
static cJSON *normalised(const cJSON *policy, bool allow_public)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "allowPublicTraffic", allow_public);
    static const char *const keys[] = {"allowOut", "denyOut"};
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(policy, keys[k]);
        cJSON *copy = a ? cJSON_Duplicate(a, 1) : cJSON_CreateArray();
        if (!copy || !cJSON_AddItemToObject(o, keys[k], copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static int apply_parsed(const struct parsed *p, char *err, size_t errlen)
{
    struct nft_policy np = {.always = E.always, .n_always = E.n_always,
                            .allow = p->allow, .n_allow = p->n_allow,
                            .deny = p->deny, .n_deny = p->n_deny,
                            .allow_public = p->allow_public};
    struct nft_expect exp;
    char why[256];
    if (nft_apply(&np, &exp, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "nf_tables: %s", why);
        return -1;
    }
    int v = nft_verify(&exp, why, sizeof(why));
    if (v != 0) {
        snprintf(err, errlen, "read-back after apply: %s", why);
        return -1;
    }
    E.exp = exp;
    if (nft_genid(&E.genid, why, sizeof(why)) < 0)
        E.genid = 0;
    return 0;
}

static void emit(void)
{
    cJSON *ev = cJSON_CreateObject();
    if (!ev)
        return;
    cJSON_AddBoolToObject(ev, "applied", E.applied);
    if (E.error[0])
        cJSON_AddStringToObject(ev, "error", E.error);
    events_emit("egress", ev);
}

int egress_set(const cJSON *policy, char *err, size_t errlen)
{
    struct parsed p;
    if (parse_policy(policy, &p, err, errlen) < 0)
        return -1;
    cJSON *norm = normalised(policy, p.allow_public);
    if (!norm) {
        parsed_free(&p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = apply_parsed(&p, err, errlen);
    parsed_free(&p);
    if (rc < 0) {
        /* The kernel kept the old ruleset; so does our state, except at
         * boot where there is no old policy and the phase stays closed. */
        cJSON_Delete(norm);
        if (!E.policy)
            snprintf(E.error, sizeof(E.error), "%s", err);
        log_warn("egress: %s", err);
        return -2;
    }
    cJSON_Delete(E.policy);
    E.policy = norm;
    E.applied = true;
    E.error[0] = 0;
    log_info("egress policy applied");
    services_phase_set("egress", true);
    emit();
    return 0;
}

static void add_always(const char *ip)
{
    if (ip && E.n_always < sizeof(E.always) / sizeof(E.always[0]) &&
        cidr_parse(ip, false, &E.always[E.n_always], NULL, 0) == 0)
        E.n_always++;
}

void egress_boot(const struct config *cfg)
{
    const cJSON *root = cfg ? cfg->json : NULL;
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(root, "network"), *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(net, "interfaces"))
        add_always(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "gateway")));
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(net, "dns"))
        add_always(cJSON_GetStringValue(it));

    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "egress");
    if (!pol) {
        /* Nothing to enforce: the phase is open. */
        services_phase_set("egress", true);
        return;
    }
    char err[256];
    if (egress_set(pol, err, sizeof(err)) < 0) {
        /* Fail closed: keep what we tried so recheck can retry it. */
        struct parsed p;
        char ignored[256];
        if (parse_policy(pol, &p, ignored, sizeof(ignored)) == 0) {
            E.policy = normalised(pol, p.allow_public);
            parsed_free(&p);
        }
        snprintf(E.error, sizeof(E.error), "%s", err);
        log_error("egress: policy not applied, services after egress held: %s", err);
        services_phase_set("egress", false);
        emit();
    }
}

int egress_recheck(char *err, size_t errlen)
{
    char why[256];
    if (!E.policy)
        return 0;
    if (E.applied) {
        uint32_t g;
        if (nft_genid(&g, why, sizeof(why)) == 0 && g == E.genid && g != 0)
            return 0;
        int v = nft_verify(&E.exp, why, sizeof(why));
        if (v == 0) {
            nft_genid(&E.genid, why, sizeof(why));
            return 0;
        }
        log_warn("egress: ruleset changed behind hearth (%s); re-applying", why);
    }
    struct parsed p;
    if (parse_policy(E.policy, &p, err, errlen) < 0)
        return -1;
    int rc = apply_parsed(&p, err, errlen);
    parsed_free(&p);
    if (rc < 0) {
        E.applied = false;
        snprintf(E.error, sizeof(E.error), "%s", err);
        services_phase_set("egress", false);
        emit();
        return -1;
    }
    E.repairs++;
    E.applied = true;
    E.error[0] = 0;
    services_phase_set("egress", true);
    emit();
    return 0;
}

unsigned egress_repairs(void)
{
    return E.repairs;
}

cJSON *egress_json(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "configured", E.policy != NULL);
    cJSON_AddBoolToObject(o, "applied", E.applied);
    if (E.policy)
        cJSON_AddItemToObject(o, "policy", cJSON_Duplicate(E.policy, 1));
    if (E.error[0])
        cJSON_AddStringToObject(o, "error", E.error);
    cJSON_AddNumberToObject(o, "generation", E.genid);
    cJSON_AddNumberToObject(o, "repairs", E.repairs);
    cJSON *always = cJSON_AddArrayToObject(o, "alwaysAllowed");
    for (size_t i = 0; always && i < E.n_always; i++) {
        char buf[64];
        cidr_format(&E.always[i], buf, sizeof(buf));
        cJSON_AddItemToArray(always, cJSON_CreateString(buf));
    }
    if (E.applied) {
        char why[256];
        cJSON *c = nft_counters_json(why, sizeof(why));
        if (c)
            cJSON_AddItemToObject(o, "counters", c);
        else
            cJSON_AddStringToObject(o, "counters_error", why);
    }
    return o;
}
