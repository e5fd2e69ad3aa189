#include "cmdline.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char text_buf[4096];

void cmdline_load(const char *text)
{
    text_buf[0] = 0;
    if (text) {
        snprintf(text_buf, sizeof(text_buf), "%s", text);
        return;
    }
    int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text_buf, sizeof(text_buf) - 1);
    close(fd);
    text_buf[n > 0 ? n : 0] = 0;
}

int cmdline_get(const char *key, char *out, size_t outlen)
{
    size_t klen = strlen(key);
    const char *p = text_buf;
    int found = -1;

    while (*p) {
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *start = p;
        int quoted = 0;
        while (*p && (quoted || (*p != ' ' && *p != '\n' && *p != '\t'))) {
            if (*p == '"')
                quoted = !quoted;
            p++;
        }
        size_t len = (size_t)(p - start);
        if (len > klen && strncmp(start, key, klen) == 0 && start[klen] == '=') {
            const char *v = start + klen + 1;
            size_t vlen = len - klen - 1;
            if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
                v++;
                vlen -= 2;
            }
            if (vlen >= outlen)
                vlen = outlen - 1;
            memcpy(out, v, vlen);
            out[vlen] = 0;
            found = 0;
        }
    }
    return found;
}
