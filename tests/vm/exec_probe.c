/* exec_probe: the command the VM exec tests run in the image, which has no
 * shell. Modes:
 *   tty CODE     prints its terminal's name and size, reads a line, prints
 *                "got:LINE" and the size again, exits CODE;
 *   lines N MS   prints line0..line(N-1), MS milliseconds apart;
 *   streams      "out" on stdout, "err" on stderr, exits 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static void size(void)
{
    struct winsize ws = {0};
    ioctl(0, TIOCGWINSZ, &ws);
    printf("%u %u\n", ws.ws_row, ws.ws_col);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "tty") == 0) {
        const char *t = ttyname(0);
        printf("%s\n", t ? t : "not a tty");
        size();
        char line[256] = "";
        if (!fgets(line, sizeof(line), stdin))
            return 1;
        line[strcspn(line, "\r\n")] = 0;
        printf("got:%s\n", line);
        size();
        return atoi(argv[2]);
    }
    if (argc >= 4 && strcmp(argv[1], "lines") == 0) {
        int n = atoi(argv[2]);
        long ms = atol(argv[3]);
        for (int i = 0; i < n; i++) {
            printf("line%d\n", i);
            fflush(stdout);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "streams") == 0) {
        fputs("out\n", stdout);
        fflush(stdout);
        fputs("err\n", stderr);
        return 3;
    }
    fputs("usage: exec_probe tty CODE | lines N MS | streams\n", stderr);
    return 2;
}
