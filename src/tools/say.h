/* The tools' way of giving a reason: printf into a caller's buffer that may be absent. */
#ifndef SOFTRDMA_TOOLS_SAY_H
#define SOFTRDMA_TOOLS_SAY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Formats into buf (len bytes, always terminated); does nothing when buf is NULL or len 0. */
static inline void tool_say(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void tool_say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

#endif
