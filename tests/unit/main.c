#include "unit.h"

#include <stdlib.h>

int unit_failures;
static struct unit_test *head, **tail = &head;

void unit_register(struct unit_test *t)
{
    *tail = t;
    tail = &t->next;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    const char *only = argc > 1 ? argv[1] : NULL;

    for (struct unit_test *t = head; t; t = t->next) {
        if (only && !strstr(t->name, only))
            continue;
        unit_failures = 0;
        t->fn();
        if (unit_failures) {
            printf("FAIL %s\n", t->name);
            failed++;
        } else {
            printf("ok   %s\n", t->name);
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
