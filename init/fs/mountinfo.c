#include "mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ev.h>

#include "lines.h"


/* Undoes the octal escapes (\040) mountinfo uses for spaces and such. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

#ifndef SYS_statx
#define SYS_statx 332
#endif

long long mountinfo_mount_id(const char *path)
{
    /* struct statx by offset: musl 1.2.3 has none, and linux/stat.h
     * clashes with its sys/stat.h. stx_mask at 0, stx_mnt_id at 144. */
    unsigned char sx[256];
    uint32_t mask;
    uint64_t id;

    memset(sx, 0, sizeof(sx));
    if (syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | 0x4000 /* AT_STATX_DONT_SYNC */,
                0x1000 /* STATX_MNT_ID */, sx) < 0)
        return errno == ENOSYS || errno == EINVAL ? -1 : 0; /* else: nothing there */
    memcpy(&mask, sx, sizeof(mask));
    if (!(mask & 0x1000))
        return -1;
    memcpy(&id, sx + 144, sizeof(id));
    return (long long)id;
}

/* Fields: id parent major:minor root target opts [optional...] - fstype
 * source superopts. The optional fields end at a lone "-". */
bool mountinfo_parse(char *line, struct mountinfo_entry *e)
{
    char *save, *tok;
    int field = 0;
    bool after_sep = false;

    memset(e, 0, sizeof(*e));
    for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        if (!after_sep) {
            if (field == 0)
                e->id = atoi(tok);
            else if (field == 3)
                e->root = tok;
            else if (field == 4)
                e->target = tok;
            else if (field == 5)
                e->opts = tok;
            else if (field > 5 && strcmp(tok, "-") == 0) {
                after_sep = true;
                field = 0;
                continue;
            }
        } else {
            if (field == 0)
                e->fstype = tok;
            else if (field == 1)
                e->source = tok;
        }
        field++;
    }
    if (!e->root || !e->target || !e->opts || !e->fstype || !e->source)
        return false;
    unescape((char *)e->root);
    unescape((char *)e->target);
    unescape((char *)e->source);
    return true;
}

/* Whether the head of an overlong line holds every field up to the
 * source whole: the separator, then the type and the source each ended by
 * a space. Paths escape their spaces (\040), so " - " is the separator. */
static bool head_complete(const char *line)
{
    const char *sep = strstr(line, " - ");
    if (!sep)
        return false;
    const char *end_type = strchr(sep + 3, ' ');
    return end_type && strchr(end_type + 1, ' ');
}

struct scan {
    bool (*fn)(const struct mountinfo_entry *e, void *ctx);
    void *ctx;
    unsigned *skipped;
};

static int scan_line(char *line, bool whole, void *ctx)
{
    struct scan *sc = ctx;
    struct mountinfo_entry e;
    if ((!whole && !head_complete(line)) || !mountinfo_parse(line, &e)) {
        if (sc->skipped)
            (*sc->skipped)++;
        return 0;
    }
    return sc->fn(&e, sc->ctx) ? 0 : 1;
}

int mountinfo_scan(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx,
                   unsigned *skipped)
{
    char line[4096];
    struct scan sc = {fn, ctx, skipped};

    if (skipped)
        *skipped = 0;
    return lines_each("/proc/self/mountinfo", line, sizeof(line), scan_line, &sc) < 0 ? -1 : 0;
}

int mountinfo_each(bool (*fn)(const struct mountinfo_entry *e, void *ctx), void *ctx)
{
    return mountinfo_scan(fn, ctx, NULL);
}

/* The watch: mi_fd is /proc/self/mountinfo, in the epoll set ep_fd for
 * EPOLLPRI; the loop watches ep_fd. Reading ep_fd's readiness (the
 * loop's epoll_wait polls it) already takes the file's change flag, so
 * the epoll_wait below usually finds nothing: it is only there so that
 * ep_fd is not left readable. */
static struct {
    int mi_fd, ep_fd;
    ev_io io;
    ev_timer first;
    struct ev_loop *loop;
    void (*fn)(void);
} W = {.mi_fd = -1, .ep_fd = -1};

static void on_table(struct ev_loop *loop, ev_io *w, int revents)
{
    struct epoll_event ev[1];
    while (epoll_wait(W.ep_fd, ev, 1, 0) > 0)
        ;
    if (W.fn)
        W.fn();
}

/* The loop adds ep_fd to its own epoll set only when it next runs, and
 * that addition polls ep_fd, which takes the file's change flag: a
 * change made between the caller's first look and then would never be
 * delivered. So fn is also called once from the loop's first turn,
 * after the addition. */
static void on_first(struct ev_loop *loop, ev_timer *w, int revents)
{
    if (W.fn)
        W.fn();
}

int mountinfo_watch(struct ev_loop *loop, void (*fn)(void))
{
    struct epoll_event ev = {.events = EPOLLPRI};

    if (W.ep_fd >= 0) {
        errno = EBUSY;
        return -1;
    }
    int mi = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (mi < 0)
        return -1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, mi, &ev) < 0) {
        int e = errno;
        if (ep >= 0)
            close(ep);
        close(mi);
        errno = e;
        return -1;
    }
    W.mi_fd = mi;
    W.ep_fd = ep;
    W.loop = loop;
    W.fn = fn;
    ev_io_init(&W.io, on_table, ep, EV_READ);
    ev_io_start(loop, &W.io);
    ev_timer_init(&W.first, on_first, 0., 0.);
    ev_timer_start(loop, &W.first);
    return 0;
}

void mountinfo_unwatch(void)
{
    if (W.ep_fd < 0)
        return;
    ev_io_stop(W.loop, &W.io);
    ev_timer_stop(W.loop, &W.first);
    close(W.ep_fd);
    close(W.mi_fd);
    W.ep_fd = W.mi_fd = -1;
    W.fn = NULL;
}
