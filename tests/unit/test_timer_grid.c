/* The shared timer grid: deadlines land on multiples of the period, more
 * than half a period ahead, so timers whose periods divide share them. */
#include "unit.h"

#include <math.h>

#include <ev.h>

#include "hearth.h"

TEST(grid_delay_lands_on_multiples_of_the_period)
{
    struct ev_loop *saved = H.loop, *loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    CHECK(loop != NULL);
    if (!loop)
        return;
    H.loop = loop;
    double now = ev_now(loop);
    for (int64_t p = 1000; p <= 30000; p += 7000) {
        double d = hearth_grid_delay(p);
        CHECK(d > (double)p / 2000.0 - 0.001);
        CHECK(d <= (double)p * 1.5 / 1000.0 + 0.001);
        double at_ms = (now + d) * 1000.0;
        CHECK(fabs(at_ms - round(at_ms / (double)p) * (double)p) < 0.01);
    }
    /* 10 s and 30 s: the 30 s deadline is one of the 10 s grid points. */
    double a = now + hearth_grid_delay(30000), b = now + hearth_grid_delay(10000);
    double k = (a - b) / 10.0;
    CHECK(fabs(k - round(k)) < 1e-6);
    CHECK_EQ_INT(hearth_grid_delay(0) == 0., 1);
    /* A one-off deadline moved onto the grid: never early, at most a
     * period late, on a multiple of the period; two deadlines a few
     * milliseconds apart land on the same point. */
    for (double after = 0.0; after < 40.0; after += 3.7) {
        double d = hearth_grid_after(after, 5000);
        CHECK(d > after);
        CHECK(d <= after + 5.0 + 0.002);
        double at_ms = (now + d) * 1000.0;
        CHECK(fabs(at_ms - round(at_ms / 5000.0) * 5000.0) < 0.01);
    }
    double e1 = hearth_grid_after(30.0, 5000), e2 = hearth_grid_after(30.005, 5000);
    CHECK(fabs(e1 - e2) < 1e-9 || fabs(e2 - e1 - 5.0) < 1e-6);
    CHECK(fabs(hearth_grid_after(2.5, 0) - 2.5) < 1e-9);
    H.loop = saved;
    ev_loop_destroy(loop);
}
