/* bench helper: appends CLOCK_MONOTONIC (ns) to argv[1] and exits with
 * argv[2] (default 0). Lets the bench see when a supervisor's child
 * reached exec without a shell in between. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct timespec ts;
    char buf[32];
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (argc < 2)
        return 2;
    int n = snprintf(buf, sizeof(buf), "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || write(fd, buf, (size_t)n) != n)
        return 3;
    close(fd);
    if (argc > 3)
        pause(); /* stay up (RSS measurements) */
    return argc > 2 ? atoi(argv[2]) : 0;
}
