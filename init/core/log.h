/* log: leveled, bounded log lines with a monotonic timestamp.
 *
 * One sink at a time: stderr (supervisor/container), /dev/kmsg or the
 * console (vm). Every line is at most LOG_LINE_MAX bytes; longer messages
 * are truncated, never allocated. errno is preserved across every call so
 * callers can log and then report the same error. */
#ifndef HEARTH_LOG_H
#define HEARTH_LOG_H

#include <stdarg.h>

enum log_level { HLOG_ERROR = 0, HLOG_WARN, HLOG_INFO, HLOG_DEBUG };

#define LOG_LINE_MAX 1024

enum log_sink { LOG_SINK_STDERR, LOG_SINK_KMSG, LOG_SINK_CONSOLE };

void log_open(enum log_sink sink);
void log_set_level(enum log_level lvl);
/* Returns 0 and sets *out when s is error|warn|info|debug. */
int log_level_parse(const char *s, enum log_level *out);
const char *log_level_name(enum log_level lvl);

void log_msg(enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level lvl, const char *fmt, va_list ap);

#define log_error(...) log_msg(HLOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(HLOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(HLOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(HLOG_DEBUG, __VA_ARGS__)

/* The descriptor log lines go to (2 for stderr): a forked child that
 * closes what it inherited keeps this one. */
int log_fd(void);

#endif
