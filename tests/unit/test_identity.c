#include "unit.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "entropy.h"
#include "err.h"
#include "identity.h"
#include "resume.h"

TEST(identity_id_is_lowercase_hex_of_the_bytes)
{
    const uint8_t id[IDENTITY_ID_BYTES] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff,
                                           0x10, 0x20, 0x30, 0x40, 0x5a, 0xa5, 0x09, 0x90};
    char out[IDENTITY_ID_HEX + 1];
    memset(out, 'x', sizeof(out));
    identity_format_id(id, out);
    CHECK_STR(out, "00017f80abcdefff102030405aa50990");
    CHECK(identity_id_valid(out));
    CHECK(!identity_id_valid("00017f80abcdefff102030405aa5099"));   /* 31 digits */
    CHECK(!identity_id_valid("00017f80abcdefff102030405aa509900")); /* 33 */
    CHECK(!identity_id_valid("00017F80ABCDEFFF102030405AA50990"));  /* upper case */
    CHECK(!identity_id_valid("00017f80abcdefff102030405aa5099g"));
    CHECK(!identity_id_valid(NULL));
}

TEST(clock_step_counts_beyond_the_threshold_either_way)
{
    int64_t step;
    const int64_t ref = 1700000000LL * 1000000000LL; /* realtime - boottime */
    /* Slewing and a leap second stay within 1 s: exactly 1000 ms is not more. */
    CHECK(!resume_clock_step_is_resume(ref, ref + 1000000000LL, 1000, &step));
    CHECK_EQ_INT(step, 1000);
    CHECK(!resume_clock_step_is_resume(ref, ref - 1000000000LL, 1000, &step));
    CHECK_EQ_INT(step, -1000);
    /* A restore: the platform puts the clock forward by the time the
     * snapshot lay on disk. */
    CHECK(resume_clock_step_is_resume(ref, ref + 1000000001LL, 1000, &step));
    CHECK(resume_clock_step_is_resume(ref, ref + 3600LL * 1000000000LL, 1000, &step));
    CHECK_EQ_INT(step, 3600000);
    /* Backward too: a snapshot taken on a host whose clock was ahead. */
    CHECK(resume_clock_step_is_resume(ref, ref - 5000000000LL, 1000, &step));
    CHECK_EQ_INT(step, -5000);
    /* hearth's own step moved the reference with it: no step at all. */
    CHECK(!resume_clock_step_is_resume(ref, ref, 1000, &step));
    CHECK_EQ_INT(step, 0);
    /* 0 turns the detector off, whatever the step. */
    CHECK(!resume_clock_step_is_resume(ref, ref + 3600LL * 1000000000LL, 0, &step));
    /* The largest threshold the schema takes (2^53 - 1) is never reached. */
    CHECK(!resume_clock_step_is_resume(0, INT64_MAX, 9007199254740991LL, &step));
    /* A configured threshold is honoured. */
    CHECK(!resume_clock_step_is_resume(ref, ref + 3000000000LL, 5000, &step));
    CHECK(resume_clock_step_is_resume(ref, ref + 5000000001LL, 5000, &step));
}

static char *temp_file(void)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/hearth-unit-crng.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    return path;
}

TEST(entropy_refresh_reports_what_worked)
{
    struct err err;
    CHECK_STR(entropy_refresh_name(ENTROPY_RESEEDED), "reseeded");
    CHECK_STR(entropy_refresh_name(ENTROPY_MIXED), "mixed");
    CHECK_STR(entropy_refresh_name(ENTROPY_FAILED), "failed");

    /* A plain file takes the bytes but not the reseed. */
    char *p = temp_file();
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_EQ_INT(entropy_refresh(p, &err), ENTROPY_MIXED);
    CHECK_CONTAINS(err.msg, "RNDRESEEDCRNG");
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size >= 32);
    unlink(p);

    CHECK_EQ_INT(entropy_refresh("/nonexistent/urandom", &err), ENTROPY_FAILED);
    CHECK_CONTAINS(err.msg, "unable to open /nonexistent/urandom");
}

static const char *member(cJSON *o, const char *name)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

TEST(identity_is_drawn_again_with_each_generation)
{
    char first[IDENTITY_ID_HEX + 1];
    struct err detail;
    char *p = temp_file();
    CHECK(p != NULL);
    if (!p)
        return;
    identity_set_device(p);
    identity_boot();
    CHECK_EQ_INT(identity_generation(), 0);
    CHECK(identity_id_valid(identity_instance_id()));
    snprintf(first, sizeof(first), "%s", identity_instance_id());

    cJSON *j = identity_json();
    CHECK(j != NULL);
    CHECK_STR(member(j, "instance_id"), first);
    CHECK_STR(member(j, "cause"), "boot");
    CHECK_EQ_INT(cJSON_GetObjectItemCaseSensitive(j, "generation")->valuedouble, 0);
    const char *at = member(j, "refreshed_at");
    CHECK(at && strlen(at) == 24 && at[4] == '-' && at[10] == 'T' && at[23] == 'Z');
    /* A boot's generator is its own: nothing to refresh, nothing written. */
    cJSON *crng = cJSON_GetObjectItemCaseSensitive(j, "crng");
    CHECK_STR(member(crng, "action"), "none");
    CHECK(member(crng, "error") == NULL);
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size == 0);
    cJSON_Delete(j);

    CHECK_EQ_INT(identity_refresh("clock_step", &detail), 0);
    CHECK_EQ_INT(identity_generation(), 1);
    CHECK(identity_id_valid(identity_instance_id()));
    CHECK(strcmp(identity_instance_id(), first) != 0);
    CHECK_CONTAINS(detail.msg, "generation 1, CRNG mixed");
    CHECK_CONTAINS(detail.msg, identity_instance_id());
    j = identity_json();
    CHECK_STR(member(j, "cause"), "clock_step");
    /* The file takes the bytes, refuses the reseed: said so, with why. */
    crng = cJSON_GetObjectItemCaseSensitive(j, "crng");
    CHECK_STR(member(crng, "action"), "mixed");
    CHECK(member(crng, "error") && strstr(member(crng, "error"), "RNDRESEEDCRNG"));
    CHECK(stat(p, &st) == 0 && st.st_size >= 32);
    cJSON_Delete(j);

    /* Nothing written at all is a failure the resume step reports. */
    identity_set_device("/nonexistent/urandom");
    CHECK_EQ_INT(identity_refresh("host", &detail), -1);
    CHECK_EQ_INT(identity_generation(), 2);
    CHECK_CONTAINS(detail.msg, "CRNG failed: unable to open");
    identity_set_device(NULL);
    unlink(p);
}
