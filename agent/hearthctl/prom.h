/* prom: the reply of the metrics method in the Prometheus text
 * exposition format (version 0.0.4): a HELP and a TYPE line per family,
 * then its samples, labels for service, mount target/type and egress
 * rule, label values escaped (backslash, double quote, newline). */
#ifndef HEARTHCTL_PROM_H
#define HEARTHCTL_PROM_H

#include <stdio.h>

struct cJSON;

/* Writes the families for one metrics result; returns 0, or -1 when
 * the result is not an object. */
int prom_write(FILE *f, const struct cJSON *metrics);

#endif
