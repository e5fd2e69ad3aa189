#include "identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "entropy.h"
#include "err.h"
#include "events.h"
#include "log.h"
#include "sha256.h"
#include "timebase.h"

static struct {
    char id[IDENTITY_ID_HEX + 1];
    uint64_t generation;
    char cause[32];
    int64_t refreshed_ms; /* wall clock */
    bool crng_done; /* the generator was stirred for this identity (not at boot) */
    enum entropy_refresh_result crng;
    char crng_error[160];
    bool weak; /* no bytes from the kernel's generator: the clocks alone */
    const char *dev;
} I;

void identity_set_device(const char *path) { I.dev = path; }

void identity_format_id(const uint8_t id[IDENTITY_ID_BYTES], char out[IDENTITY_ID_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < IDENTITY_ID_BYTES; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    out[IDENTITY_ID_HEX] = 0;
}

bool identity_id_valid(const char *text)
{
    if (!text || strlen(text) != IDENTITY_ID_HEX)
        return false;
    for (const char *p = text; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* 32 bytes for the id and the seed. The kernel's generator first, read
 * after it was reseeded; hashed with the clocks' readings and the
 * previous id, so that even where the reseed was refused (a container
 * without CAP_SYS_ADMIN, whose clones would read the same bytes until the
 * kernel reseeds by itself) two sandboxes restored at different moments
 * draw different ids. */
static void draw(uint8_t out[32])
{
    struct {
        uint8_t rnd[32];
        struct timespec real, mono, boot;
        pid_t pid;
        char prev[IDENTITY_ID_HEX + 1];
    } in;
    struct sha256 h;

    memset(&in, 0, sizeof(in));
    I.weak = getrandom(in.rnd, sizeof(in.rnd), GRND_NONBLOCK) != (ssize_t)sizeof(in.rnd);
    if (I.weak)
        memset(in.rnd, 0, sizeof(in.rnd));
    clock_gettime(CLOCK_REALTIME, &in.real);
    clock_gettime(CLOCK_MONOTONIC, &in.mono);
    clock_gettime(CLOCK_BOOTTIME, &in.boot);
    in.pid = getpid();
    memcpy(in.prev, I.id, sizeof(in.prev));
    sha256_init(&h);
    sha256_update(&h, &in, sizeof(in));
    sha256_final(&h, out);
    explicit_bzero(&in, sizeof(in));
    explicit_bzero(&h, sizeof(h));
}

static void emit(void)
{
    cJSON *ev = identity_json();
    if (ev)
        events_emit("identity", ev);
}

/* The generator first, so the id is drawn from the reseeded one. At
 * boot it is left alone: a boot's generator is its own, and in a VM it is
 * usually not seeded yet (RNDRESEEDCRNG says ENODATA). */
static int make(const char *cause, bool stir)
{
    uint8_t b[32];
    struct err err;

    I.crng_done = stir;
    I.crng_error[0] = 0;
    if (stir) {
        I.crng = entropy_refresh(I.dev, &err);
        snprintf(I.crng_error, sizeof(I.crng_error), "%s", err.msg);
        if (I.crng != ENTROPY_RESEEDED)
            log_warn("identity: %s", err.msg);
    }
    draw(b);
    identity_format_id(b, I.id);
    explicit_bzero(b, sizeof(b));
    snprintf(I.cause, sizeof(I.cause), "%s", cause);
    I.refreshed_ms = wall_ms();
    if (I.weak)
        log_info("identity: the kernel's generator is not seeded yet: instance id made from "
                 "the clocks alone");
    log_info("identity: instance %s, generation %llu (%s)", I.id,
             (unsigned long long)I.generation, cause);
    emit();
    return stir && I.crng == ENTROPY_FAILED ? -1 : 0;
}

void identity_boot(void)
{
    I.generation = 0;
    make("boot", false);
}

int identity_refresh(const char *cause, struct err *detail)
{
    I.generation++;
    int rc = make(cause, true);
    err_set(detail, "instance %s, generation %llu, CRNG %s%s%s", I.id,
            (unsigned long long)I.generation, entropy_refresh_name(I.crng),
            I.crng_error[0] ? ": " : "", I.crng_error);
    return rc;
}

uint64_t identity_generation(void) { return I.generation; }
const char *identity_instance_id(void) { return I.id; }

cJSON *identity_json(void)
{
    char t[40];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "instance_id", I.id);
    cJSON_AddNumberToObject(o, "generation", (double)I.generation);
    cJSON_AddStringToObject(o, "cause", I.cause);
    timebase_utc_text(I.refreshed_ms, true, t, sizeof(t));
    cJSON_AddStringToObject(o, "refreshed_at", t);
    cJSON *c = cJSON_AddObjectToObject(o, "crng");
    if (c) {
        cJSON_AddStringToObject(c, "action", I.crng_done ? entropy_refresh_name(I.crng) : "none");
        if (I.crng_error[0])
            cJSON_AddStringToObject(c, "error", I.crng_error);
    }
    if (I.weak)
        cJSON_AddBoolToObject(o, "clocks_only", true);
    return o;
}
