/* pathname: lexical tests on absolute path names (see pathname.h). */
#include "pathname.h"

#include <string.h>

bool pathname_at_or_under(const char *path, const char *top)
{
    size_t n = strlen(top);
    while (n > 1 && top[n - 1] == '/')
        n--;
    if (n == 1 && top[0] == '/')
        return true;
    return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
