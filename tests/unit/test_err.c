#include "unit.h"

#include <errno.h>
#include <string.h>

#include "err.h"

TEST(err_unable_spells_the_form_and_keeps_the_errno)
{
    struct err e;
    CHECK_EQ_INT(err_unable(&e, ENOENT, "open %s", "/etc/x"), -1);
    CHECK_STR(e.msg, "unable to open /etc/x: No such file or directory");
    CHECK_EQ_INT(e.code, ENOENT);
    /* No errno: no reason part. */
    err_unable(&e, 0, "find a free slot");
    CHECK_STR(e.msg, "unable to find a free slot");
    CHECK_EQ_INT(e.code, 0);
}

TEST(err_set_field_and_wrap)
{
    struct err e;
    CHECK_EQ_INT(err_set(&e, "mount %s is gone", "/data"), -1);
    CHECK_STR(e.msg, "mount /data is gone");
    CHECK_EQ_INT(e.code, 0);
    CHECK_EQ_INT(err_field(&e, "services[0].after[1]", "unknown service \"%s\"", "db"), -1);
    CHECK_STR(e.msg, "services[0].after[1]: unknown service \"db\"");
    err_unable(&e, EIO, "sync %s", "/data");
    CHECK_EQ_INT(err_wrap(&e, "mounts"), -1);
    CHECK_STR(e.msg, "mounts: unable to sync /data: Input/output error");
    CHECK_EQ_INT(e.code, EIO);
    err_wrap(&e, "service %s", "api");
    CHECK_STR(e.msg, "service api: mounts: unable to sync /data: Input/output error");
    CHECK_EQ_INT(e.code, EIO);
}

TEST(err_cuts_long_messages_with_their_nul)
{
    struct err e;
    char big[3 * ERR_MAX];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';

    err_set(&e, "%s", big);
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    err_unable(&e, EPERM, "write %s", big);
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    CHECK(strncmp(e.msg, "unable to write aaa", 19) == 0);
    CHECK_EQ_INT(e.code, EPERM);
    err_field(&e, big, "bad");
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    err_field(&e, "x", "%s", big);
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    CHECK(strncmp(e.msg, "x: aaa", 6) == 0);

    /* Wrapping a message that fills the buffer: the subject comes first,
     * the old message's tail is what is cut. */
    err_set(&e, "%s", big);
    err_wrap(&e, "subject");
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    CHECK(strncmp(e.msg, "subject: aaa", 12) == 0);
    /* A subject longer than the buffer: cut, no ": " written past it. */
    err_wrap(&e, "%s", big);
    CHECK_EQ_INT(strlen(e.msg), ERR_MAX - 1);
    CHECK(strchr(e.msg, ':') == NULL);
}

TEST(err_helpers_take_null)
{
    CHECK_EQ_INT(err_unable(NULL, EIO, "read %s", "x"), -1);
    CHECK_EQ_INT(err_set(NULL, "x"), -1);
    CHECK_EQ_INT(err_wrap(NULL, "x"), -1);
    CHECK_EQ_INT(err_field(NULL, "a", "b"), -1);
    CHECK_EQ_INT(err_copy(NULL, NULL), -1);
    CHECK_STR(err_msg(NULL), "");

    struct err a, b;
    err_unable(&a, EACCES, "open %s", "f");
    CHECK_EQ_INT(err_copy(&b, &a), -1);
    CHECK_STR(b.msg, "unable to open f: Permission denied");
    CHECK_EQ_INT(b.code, EACCES);
    err_copy(&b, NULL);
    CHECK_STR(b.msg, "");
    CHECK_EQ_INT(b.code, 0);
}
