// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/tools/json.c src/tools/report.c src/tools/util.c fuzz/fuzz_report.c -o fuzz_report
// clang-format on

/* libFuzzer target for what `softrdma report FILE` does with a result file, which can come
 * from anywhere (a colleague's run, a download): the JSON parser and the HTML report. The
 * input is the file's bytes. Oracles (abort()):
 * - json_parse on an exact-size heap copy (ASan sees overreads) either fails and gives no
 *   document, or gives one;
 * - a document renders (or is refused with a message) without a crash, a leak or undefined
 *   behaviour, and the page it writes has no '<script' (strings are escaped);
 * - parsing is deterministic: the same bytes give a document of the same type again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/json.h"
#include "tools/report.h"

static void must(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	must(text != NULL);
	memcpy(text, data, size);
	struct json *doc = NULL, *again = NULL;
	struct json_error err;
	memset(&err, 0, sizeof(err));
	int r = json_parse(text, size, &doc, &err);
	if (r != 0) {
		must(doc == NULL);
		free(text);
		return 0;
	}
	must(doc != NULL);
	must(json_parse(text, size, &again, &err) == 0 && again != NULL);
	must(json_type(again) == json_type(doc));
	json_free(again);
	char *page = NULL;
	size_t page_len = 0;
	FILE *out = open_memstream(&page, &page_len);
	must(out != NULL);
	char why[256] = "";
	int rr = report_html(doc, out, why, sizeof(why));
	fclose(out);
	if (rr != 0)
		must(why[0] != 0);
	else
		must(page_len > 0 && memmem(page, page_len, "<script", 7) == NULL);
	free(page);
	json_free(doc);
	free(text);
	return 0;
}
