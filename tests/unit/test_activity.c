/* The lease rules (init/sandbox/activity.c) and hearth's own sd_notify keys
 * (init/proc/notify.c): HEARTH_BUSY= and HEARTH_BUSY_REASON=. */
#include <string.h>

#include <cJSON.h>
#include <ev.h>

#include "activity.h"
#include "config.h"
#include "err.h"
#include "events.h"
#include "hearth.h"
#include "notify.h"
#include "unit.h"

static int parse(const char *s, struct notify_msg *m)
{
    return notify_parse(s, strlen(s), m);
}

TEST(notify_parse_lease_keys)
{
    struct notify_msg m;

    CHECK_EQ_INT(parse("HEARTH_BUSY=90\nHEARTH_BUSY_REASON=reading mail", &m), 0);
    CHECK(m.has_busy && m.has_busy_reason && !m.ready);
    CHECK_EQ_INT(m.busy_sec, 90);
    CHECK_STR(m.busy_reason, "reading mail");
    CHECK_EQ_INT(m.understood, 2);
    CHECK_EQ_INT(m.unknown, 0);
    /* A release, alone. */
    CHECK_EQ_INT(parse("HEARTH_BUSY=0", &m), 0);
    CHECK(m.has_busy && !m.has_busy_reason);
    CHECK_EQ_INT(m.busy_sec, 0);
    /* Beside systemd's own keys. */
    CHECK_EQ_INT(parse("READY=1\nHEARTH_BUSY=5\nSTATUS=up", &m), 0);
    CHECK(m.ready && m.has_busy && m.has_status);
    CHECK_EQ_INT(m.understood, 3);
}

TEST(notify_parse_lease_keys_refused_values)
{
    struct notify_msg m;
    static const char *const bad[] = {
        "HEARTH_BUSY=", "HEARTH_BUSY=-1", "HEARTH_BUSY=1.5", "HEARTH_BUSY= 5", "HEARTH_BUSY=5s",
        "HEARTH_BUSY=99999999999999999999999", "HEARTH_BUSY=0x10",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(parse(bad[i], &m), 0);
        CHECK(!m.has_busy);
        CHECK_EQ_INT(m.ignored, 1);
    }
    /* Invalid UTF-8: the reason is ignored whole. */
    CHECK_EQ_INT(parse("HEARTH_BUSY=5\nHEARTH_BUSY_REASON=\xff\xfe", &m), 0);
    CHECK(m.has_busy && !m.has_busy_reason);
    CHECK_EQ_INT(m.ignored, 1);
    /* Controls become '?'. */
    CHECK_EQ_INT(parse("HEARTH_BUSY_REASON=a\tb\x1b[2Jc", &m), 0);
    CHECK(m.has_busy_reason);
    CHECK_STR(m.busy_reason, "a?b?[2Jc");
    /* Lower case is another key, unknown. */
    CHECK_EQ_INT(parse("hearth_busy=5", &m), 0);
    CHECK(!m.has_busy);
}

TEST(notify_parse_lease_reason_cut)
{
    struct notify_msg m;
    char buf[NOTIFY_DATAGRAM_MAX];
    int n = snprintf(buf, sizeof(buf), "HEARTH_BUSY_REASON=");
    /* "é" (2 bytes) repeated past the 255 kept: cut on a boundary. */
    for (int i = 0; i < 200; i++) {
        buf[n++] = '\xc3';
        buf[n++] = '\xa9';
    }
    CHECK_EQ_INT(notify_parse(buf, (size_t)n, &m), 0);
    CHECK(m.has_busy_reason);
    CHECK_EQ_INT(strlen(m.busy_reason), 254);
}

static const struct activity_lease_rules rules = {
    .max_ms = 60000, .interval_ms = 1000, .reason_max = 8};

TEST(activity_lease_taken_capped_released)
{
    struct activity_lease_slot s = {0};

    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 30, "indexing", 5000), ACTIVITY_LEASE_TAKEN);
    CHECK_EQ_INT(s.until_ms, 35000);
    CHECK_STR(s.reason, "indexing");
    /* Longer than max_ms: cut to it. An absurd count does not overflow. */
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 61, NULL, 7000), ACTIVITY_LEASE_CAPPED);
    CHECK_EQ_INT(s.until_ms, 67000);
    CHECK_STR(s.reason, "");
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, UINT64_MAX, "x", 9000), ACTIVITY_LEASE_CAPPED);
    CHECK_EQ_INT(s.until_ms, 69000);
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 60, "x", 11000), ACTIVITY_LEASE_TAKEN);
    CHECK_EQ_INT(s.until_ms, 71000);
    CHECK_EQ_INT(s.capped, 2);
    CHECK_EQ_INT(s.taken, 4);
    /* Released at once, and a release needs no interval. */
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 0, NULL, 11001), ACTIVITY_LEASE_RELEASED);
    CHECK_EQ_INT(s.until_ms, 0);
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 0, NULL, 11002), ACTIVITY_LEASE_NONE);
    CHECK_EQ_INT(s.released, 1);
}

TEST(activity_lease_rate_limit)
{
    struct activity_lease_slot s = {0};

    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 10, "a", 1000), ACTIVITY_LEASE_TAKEN);
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 20, "b", 1999), ACTIVITY_LEASE_RATE);
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 20, "b", 1500), ACTIVITY_LEASE_RATE);
    /* The refused ones changed nothing, nor moved the interval. */
    CHECK_EQ_INT(s.until_ms, 11000);
    CHECK_STR(s.reason, "a");
    CHECK_EQ_INT(s.refused, 2);
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 20, "b", 2000), ACTIVITY_LEASE_TAKEN);
    CHECK_EQ_INT(s.until_ms, 22000);
    /* A lease that ended by itself: a release finds nothing. */
    CHECK_EQ_INT(activity_lease_judge(&rules, &s, 0, NULL, 22000), ACTIVITY_LEASE_NONE);
}

TEST(activity_lease_reason_cut_on_a_character)
{
    struct activity_lease_slot s = {0};

    /* "ééééé" is 10 bytes; 8 kept are four whole characters. */
    activity_lease_judge(&rules, &s, 1, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0);
    CHECK_STR(s.reason, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    /* "aé..." : the 8th byte begins a character, cut before it. */
    activity_lease_judge(&rules, &s, 1, "abcdefg\xc3\xa9", 5000);
    CHECK_STR(s.reason, "abcdefg");
}

/* ---- the exec hook: a plain call other modules make ---- */

static char last_event[2048];
static int n_events;

static void sink(const char *line, size_t len)
{
    if (strstr(line, "\"type\":\"activity\"")) {
        n_events++;
        snprintf(last_event, sizeof(last_event), "%.*s", (int)len, line);
    }
}

TEST(activity_exec_sessions_make_busy)
{
    struct ev_loop *saved = H.loop;
    H.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    CHECK(H.loop != NULL);
    events_set_sink(sink);
    n_events = 0;

    /* No services; the test machine's own network traffic never counts. */
    static struct config cfg;
    cfg.json = cJSON_Parse("{\"activity\": {\"egress_bytes\": 1000000000000000}}");
    sections_activity_extract(cJSON_GetObjectItem(cfg.json, "activity"), &cfg.activity);
    activity_setup(&cfg);
    cJSON *a = activity_json();
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(a, "busy")));
    cJSON_Delete(a);

    activity_exec_count(2);
    CHECK_EQ_INT(n_events, 1);
    CHECK(strstr(last_event, "\"busy\":true") != NULL);
    CHECK(strstr(last_event, "\"source\":\"exec\"") != NULL);
    CHECK(strstr(last_event, "2 exec sessions open") != NULL);
    a = activity_json();
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(a, "busy")));
    CHECK_EQ_INT(cJSON_GetObjectItem(a, "exec_sessions")->valueint, 2);
    /* Busy only while the sessions are open: a call ends it, so no
     * sample timer is armed (nobody subscribed). */
    CHECK_STR(cJSON_GetObjectItem(a, "sampling")->valuestring, "off");
    cJSON_Delete(a);
    /* The same count again is no change. */
    activity_exec_count(2);
    activity_exec_count(1);
    CHECK_EQ_INT(n_events, 1);
    /* The last one ends: idle at once (nothing else was seen). */
    activity_exec_count(0);
    CHECK_EQ_INT(n_events, 2);
    CHECK(strstr(last_event, "\"busy\":false") != NULL);
    CHECK(strstr(last_event, "\"reasons\":[]") != NULL);
    a = activity_json();
    CHECK_STR(cJSON_GetObjectItem(a, "sampling")->valuestring, "off");
    cJSON_Delete(a);
    /* No lease can hold: a freeze goes ahead. */
    struct err err;
    CHECK_EQ_INT(activity_freeze_check(&err, NULL), 0);

    events_set_sink(NULL);
    activity_setup(NULL);
    cJSON_Delete(cfg.json);
    ev_loop_destroy(H.loop);
    H.loop = saved;
}
