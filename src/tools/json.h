/* A small, strict JSON (RFC 8259) DOM parser for the softrdma tools, written to read files the
 * tools did not write themselves (e.g. `softrdma report` on a result someone sent): it must
 * never crash, hang or overrun on any input, and it reports the first error with its position.
 *
 * Strict means: exactly one value, surrounded by optional whitespace (space, tab, LF, CR; a
 * leading UTF-8 byte order mark is skipped, RFC 8259 8.1 allows that); no comments, no trailing
 * commas, no single quotes, no NaN/Infinity, no leading zeros or '+' signs, no leading or trailing
 * '.'; strings must be valid UTF-8 (no overlong forms, no encoded surrogates, nothing above
 * U+10FFFF) without raw control characters (< 0x20); \uXXXX escapes are decoded to UTF-8, a
 * surrogate pair to one code point, and a lone surrogate is an error. Numbers follow the RFC
 * grammar and are converted with strtod (so the process must use the "C" LC_NUMERIC locale, as
 * every program does until it calls setlocale); a number too large for a double is an error, one
 * too small becomes 0 (or the nearest subnormal). Duplicate object keys are kept (the RFC only
 * says SHOULD be unique): json_get() returns the first.
 *
 * Limits: nesting depth JSON_MAX_DEPTH (arrays + objects), input JSON_MAX_SIZE bytes. Each value
 * is one allocation plus its string or child array, so memory is a small multiple of the input.
 *
 * Threads: a parsed tree is immutable; any number of threads may read it at once. The parser
 * keeps no global state. */
#ifndef SOFTRDMA_TOOLS_JSON_H
#define SOFTRDMA_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define JSON_MAX_DEPTH 64
#define JSON_MAX_SIZE  (64u << 20) /* bytes of JSON text */

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

/* A parsed value; opaque, read it through the accessors below. */
struct json;

/* Where and why parsing failed. line and column are 1-based; column counts bytes (not
 * characters) from the start of the line, tabs as one. For "unexpected end of input" the
 * position is just past the last byte. msg is NUL-terminated and has no position in it. */
struct json_error {
	int line;
	int column;
	size_t offset; /* byte offset of the error in the input */
	char msg[96];
};

/* Parses text[0..len) (need not be NUL-terminated; a NUL byte inside is an error like any
 * other stray byte). On success returns 0 and *out is a tree the caller owns (json_free). On
 * failure returns -EINVAL (syntax; err filled), -E2BIG (len > JSON_MAX_SIZE; err filled),
 * -ENOMEM (err filled) and *out is NULL; nothing is leaked. The input stays the caller's and is
 * not referenced after the call. err may be NULL. */
int json_parse(const char *text, size_t len, struct json **out, struct json_error *err);

/* Reads the file at path and parses it like json_parse. Additionally returns the negative errno
 * of open/read failures (err->msg then says what failed, line and column are 0), and -E2BIG for
 * files larger than JSON_MAX_SIZE. */
int json_parse_file(const char *path, struct json **out, struct json_error *err);

/* Frees a tree from json_parse; NULL is allowed. Only ever call it on a root: the accessors
 * return values that belong to their root and die with it. */
void json_free(struct json *v);

/* The type of v; JSON_NULL for v == NULL, so a missing member reads like an explicit null. */
enum json_type json_type(const struct json *v);

/* Member "key" of object obj (the first, if the key is duplicated); NULL if obj is NULL or not
 * an object, or has no such member. Keys compare byte-wise (no Unicode normalisation). */
const struct json *json_get(const struct json *obj, const char *key);

/* Element i of array arr, or the value of member i of object arr (in document order); NULL if
 * arr is not an array/object or i is out of range. */
const struct json *json_at(const struct json *arr, size_t i);

/* Key of member i of object obj (NUL-terminated UTF-8, owned by the tree); NULL otherwise. */
const char *json_key(const struct json *obj, size_t i);

/* Number of elements of an array or members of an object; 0 for anything else (and NULL). */
size_t json_len(const struct json *v);

/* The value of a number, or dflt if v is NULL or not a number. Never NaN or infinite unless
 * dflt is. */
double json_num(const struct json *v, double dflt);

/* The bool value, or dflt if v is NULL or not true/false. */
bool json_bool(const struct json *v, bool dflt);

/* The NUL-terminated UTF-8 text of a string (owned by the tree), or NULL if v is NULL or not a
 * string. A string containing \u0000 reads as if cut there: json_strlen gives the full length. */
const char *json_str(const struct json *v);

/* Length in bytes of a string's UTF-8 text (without the terminating NUL), 0 for non-strings. */
size_t json_strlen(const struct json *v);

#endif
