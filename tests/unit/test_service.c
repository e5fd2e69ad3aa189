/* Services on a loop of their own: while suspended (a frozen sandbox) no
 * health probe runs and no backoff elapses; after the resume they pick up
 * where they were. Real children (sleep, false), reaped from a timer. */
#include "unit.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>
#include <ev.h>

#include "config.h"
#include "err.h"
#include "hearth.h"
#include "reaper.h"
#include "service.h"

static void reap_cb(struct ev_loop *loop, ev_timer *w, int revents) { reaper_reap(); }
static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents) { ev_break(loop, EVBREAK_ALL); }

static void run_ms(int64_t ms)
{
    ev_timer reap, stop;
    ev_timer_init(&reap, reap_cb, 0.002, 0.002);
    ev_timer_init(&stop, stop_cb, (double)ms / 1000., 0.);
    ev_timer_start(H.loop, &reap);
    ev_timer_start(H.loop, &stop);
    ev_now_update(H.loop);
    ev_run(H.loop, 0);
    ev_timer_stop(H.loop, &reap);
    ev_timer_stop(H.loop, &stop);
    reaper_reap();
}

/* service_list_json()[0], detached: the caller deletes it. */
static cJSON *first(void)
{
    cJSON *arr = service_list_json();
    cJSON *o = cJSON_DetachItemFromArray(arr, 0);
    cJSON_Delete(arr);
    return o;
}

static double num(const cJSON *o, const char *path1, const char *path2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);
    if (path2)
        v = cJSON_GetObjectItemCaseSensitive(v, path2);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *path1, const char *path2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);
    if (path2)
        v = cJSON_GetObjectItemCaseSensitive(v, path2);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static bool all_down;
static void on_down(void) { all_down = true; }

static struct config *setup(const char *json)
{
    struct err err = {0};
    struct config *cfg = config_parse(json, strlen(json), &err);
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  config: %s\n", err.msg);
        return NULL;
    }
    H.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK);
    service_init(cfg);
    service_start_all();
    return cfg;
}

static void teardown(struct config *cfg)
{
    service_suspend(false);
    all_down = false;
    service_stop_all(on_down);
    for (int i = 0; i < 300 && !all_down; i++)
        run_ms(10);
    CHECK(all_down);
    service_free();
    ev_loop_destroy(H.loop);
    H.loop = NULL;
    config_free(cfg);
}

TEST(service_health_paused_while_suspended)
{
    struct config *cfg = setup(
        "{\"services\":[{\"name\":\"s\",\"argv\":[\"sleep\",\"100\"],"
        "\"health\":{\"exec\":[\"false\"],\"interval_ms\":60,\"failures\":2},"
        "\"backoff\":{\"initial_ms\":10}}]}");
    if (!cfg)
        return;
    for (int i = 0; i < 100 && strcmp(service_state_of(0), "running") != 0; i++)
        run_ms(5);
    CHECK_STR(service_state_of(0), "running");
    service_suspend(true);
    CHECK(service_suspended());
    run_ms(400); /* ~6 intervals: 2 failures would have restarted it */
    cJSON *o = first();
    CHECK_STR(str(o, "state", NULL), "running");
    CHECK_EQ_INT(num(o, "restarts", NULL), 0);
    CHECK_EQ_INT(num(o, "health", "checks"), 0);
    CHECK_STR(str(o, "health", "status"), "suspended");
    cJSON_Delete(o);

    /* Resumed: probed at once, restarted after two failures. */
    service_suspend(false);
    for (int i = 0; i < 100; i++) {
        run_ms(10);
        o = first();
        bool done = num(o, "restarts", NULL) >= 1;
        cJSON_Delete(o);
        if (done)
            break;
    }
    o = first();
    CHECK_EQ_INT(num(o, "restarts", NULL), 1);
    cJSON_Delete(o);
    teardown(cfg);
}

TEST(service_backoff_held_while_suspended)
{
    struct config *cfg = setup("{\"services\":[{\"name\":\"c\",\"argv\":[\"false\"],"
                               "\"backoff\":{\"initial_ms\":150,\"max_ms\":150}}]}");
    if (!cfg)
        return;
    for (int i = 0; i < 100 && strcmp(service_state_of(0), "backoff") != 0; i++)
        run_ms(5);
    CHECK_STR(service_state_of(0), "backoff");
    service_suspend(true);
    run_ms(400);
    cJSON *o = first();
    CHECK_STR(str(o, "state", NULL), "backoff");
    CHECK_EQ_INT(num(o, "restarts", NULL), 1);
    double left = num(o, "next_start_ms", NULL);
    CHECK(left > 0 && left <= 170);
    cJSON_Delete(o);
    service_suspend(false);
    run_ms(400);
    o = first();
    CHECK(num(o, "restarts", NULL) >= 2);
    cJSON_Delete(o);
    teardown(cfg);
}
