/* `softrdma report`: one self-contained HTML5 page (inline CSS and SVG; no script, no external
 * resource, no network) from the JSON result of `softrdma compare`, or from one or several
 * results of `softrdma compare --scenario` (second part below).
 *
 * The JSON result is the contract between compare.c (the writer) and report.c (the reader);
 * this is version 1 of it.
 *
 * General rules
 *   - All numbers are plain JSON numbers; the unit is in the key name (_us microseconds,
 *     _ms milliseconds, _s seconds, gbps Gbit/s (10^9 bit/s), mpps 10^6 messages/s,
 *     _pct percent, size in bytes).
 *   - Any section (latency, bandwidth, cpu, setup, loss) may be missing or null when that step
 *     was not run; a step that was deliberately skipped is an object {"skipped": "why"}, e.g.
 *     "loss": {"skipped": "needs root: ..."}. The report shows the reason instead of the data.
 *   - Strings are arbitrary UTF-8 (device names, host names, error text): untrusted; the
 *     report HTML-escapes every one of them.
 *   - A series entry or a point may carry {"error": "text"} instead of its figures.
 *
 * Top level (an object)
 *   "tool":        "softrdma compare"
 *   "schema":      1                            version of this format; the report refuses others
 *   "started":     "2026-12-02T19:30:00Z"       UTC, ISO 8601
 *   "duration_s":  95.2                         wall time of the whole run
 *   "host":        {"name": "box", "kernel": "6.1.0-18-amd64", "cpus": 2,
 *                   "cpu_model": "AMD EPYC ..."}
 *   "mode":        "loopback" or "two hosts"
 *   "quick":       false                        true: shortened run (fewer samples)
 *   "server":      "127.0.0.1"
 *   "transports":  the order to draw them in (and the colour order); "id" is the key used by
 *                  every series below:
 *       [{"id": "roce",  "label": "RoCEv2",      "kind": "rdma",  "device": "roce_lo"},
 *        {"id": "iwarp", "label": "iWARP",       "kind": "rdma",  "device": "iwarp_lo"},
 *        {"id": "udp",   "label": "UDP (floor)", "kind": "floor"},
 *        {"id": "tcp",   "label": "TCP (floor)", "kind": "floor"}]
 *
 *   "latency": {
 *       "size": 100,                            message size, bytes
 *       "what": "round trip, 100 B SEND / datagram / write, both sides busy-polling",
 *       "series": [                             one per transport:
 *           {"transport": "roce", "samples": 20000,
 *            "min_us": 12.1, "p50_us": 16.3, "p90_us": 20.0, "p99_us": 80.2, "p999_us": 190.4,
 *            "max_us": 900.0, "mean_us": 18.0, "stdev_us": 9.5,
 *            "jitter_us": 63.9,                 p99 - p50
 *            "cdf": [[12.1, 0.0], [13.0, 0.01], ..., [900.0, 1.0]]}
 *                                               [us, fraction <= us], ascending, <= 200 points
 *           or {"transport": "x", "error": "text"}]}
 *
 *   "bandwidth": {
 *       "what": "RDMA WRITE (floors: a stream of writes / datagrams), one direction",
 *       "series": [{"transport": "roce", "points": [
 *                      {"size": 8, "gbps": 0.05, "mpps": 0.8}, ...,
 *                      {"size": 4194304, "gbps": 9.1, "mpps": 0.0003}]}, ...]}
 *                  a point may be {"size": N, "error": "text"}
 *
 *   "cpu": {
 *       "what": "CPU time (user + system, all threads) per message during the measurement",
 *       "series": [{"transport": "roce", "test": "latency 100 B",
 *                   "client_us_per_msg": 9.8, "server_us_per_msg": 9.7}, ...]}
 *                  any number of entries per transport, one per test
 *
 *   "setup": {
 *       "what": "connection set-up: rdma_cm resolve address + route + connect until
 *                ESTABLISHED (TCP: connect until accepted)",
 *       "series": [{"transport": "roce", "samples": 20,
 *                   "p50_ms": 0.45, "p90_ms": 0.60, "max_ms": 1.2}, ...]}
 *
 *   "loss": {
 *       "link": "two network namespaces joined by TUN devices through a user-space forwarder
 *                dropping packets at random",
 *       "size": 65536,                          message size, bytes
 *       "what": "RDMA WRITE goodput (floors: TCP stream; UDP has no retransmission and is left
 *                out)",
 *       "series": [{"transport": "roce", "points": [
 *                      {"loss_pct": 0, "gbps": 2.1}, {"loss_pct": 0.01, "gbps": 2.0},
 *                      {"loss_pct": 0.1, "gbps": 1.5}, {"loss_pct": 1, "gbps": 0.2}, ...]},
 *                  ...]}
 *                  a point may be {"loss_pct": 1, "error": "retry exceeded"}
 *
 *   "summary": ["Latency: RoCEv2's median round trip (16.3 us) is 1.1x iWARP's (14.8 us); ...",
 *               ...]                            sentences computed from the data by compare
 *   "errors":  ["iwarp bandwidth 4 MiB: timed out", ...]        may be empty
 *
 * What the page contains (ids are stable; tests and scripts may rely on them):
 *   table-transports, table-latency, plot-latency-cdf (x: log scale, us), table-bandwidth and
 *   plot-bandwidth (x: log2 bytes; y: log scale, Gbit/s), table-cpu, table-setup, table-loss
 *   and plot-loss (x: the measured loss rates as categories; y: linear, Gbit/s). Each plot is an
 *   <svg> with one <g class="series" data-transport="ID"> per series holding <polyline>s whose
 *   "points" attribute is "x,y x,y ..." (one pair per valid data point; a run of points is
 *   split where a point carries an error) and, for bandwidth and loss, one <circle> per point;
 *   error points are drawn as <path class="error-point"> markers.
 *
 * ---- The scenario result (`softrdma compare --scenario ... --json FILE`), also version 1 ----
 *
 * Written by scenario.c's write_json. Same general rules (units in key names, strings
 * untrusted), but the reader is strict about its structure, because the file is small and
 * every part of it is needed to draw the page: a member of the wrong type, a number out of
 * range, no rows, an unknown scenario or another schema refuse the whole file with an error
 * naming the member ("rows[2].jain: not a number"). Only the figures of a measured row may be
 * absent (or null): they are shown as a dash.
 *
 * Top level (an object)
 *   "tool":          "softrdma compare --scenario"   how the report tells it from the above
 *   "schema":        1
 *   "started":       "2026-12-07T16:10:00Z"          UTC, ISO 8601 (optional)
 *   "duration_s":    52                              wall time of all the rows (optional)
 *   "scenario":      "incast", "victim" or "loss"
 *   "senders":       2                               senders into the congested port, 1..64
 *   "rate_bps":      200000000                       every switch port's rate, bit/s
 *   "seconds":       10                              traffic time of each row
 *   "message_bytes": 65536, "probe_bytes": 100       the senders' and the probe's messages
 *   "loss":          0.01                            loss only: share of packets the switch
 *                                                    drops at random (0.01 = 1 %), 0..1
 *   "rows":          [row, ...]                      1..64, in the order they ran
 *
 * A row (one fabric configuration, on a fresh switch)
 *   "id":     "roce", "roce_pfc", "roce_dcqcn", "roce_pfc_dcqcn", "roce_sr" or "iwarp"
 *             (the report takes any string)
 *   "label":  "RoCEv2, PFC"                          what to call it
 *   "ok":     false, "error": "sender 1: timed out"  not measured, and why; nothing else
 *   "ok":     true, and the figures (numbers >= 0, at most 1e15):
 *     "throughput_gbps"   IP bytes the switch delivered from the senders while all of them
 *                         sent, summed (required; loss: what crossed the port, resends too)
 *     "shares_gbps"       [each sender's part of it]
 *     "app_shares_gbps"   [what each sender's program measured]
 *     "jain"              Jain's fairness index of the shares, 0..1
 *     "goodput_gbps"      the programs' own figures summed (required for loss)
 *     "lost"              packets the switch dropped at random (loss)
 *     "probe_p50_us", "probe_p99_us"   the 100 B ping-pong's round trip (incast, loss)
 *     "victim_gbps", "victim_app_gbps" the victim flow at its port / by its program (victim)
 *     "drops"             packets dropped by queues (switch drop-tail, hosts' queues)
 *     "marks"             ECN marks at the congested port
 *     "cnps"              CNPs (priority 6 packets) the switch carried
 *     "pauses", "pause_ms"   PFC pause frames from the switch to the senders, and the time
 *                         the senders spent paused, summed
 *     "queue_max_kib"     the congested port's deepest queue
 *     RoCE rows only (iWARP's repairs are TCP's own, not counted):
 *     "resent"            request packets sent again (go-back-N's and selective repeat's)
 *     "sr_resent"         of those, selective repeat's for a SACK's hole
 *     "sacks"             SACKs the senders took
 *
 * What the page contains for scenario results (one or several files in one page, the K-th
 * file, 1-based, in <section id="scenario-K" data-scenario="NAME">):
 *   table-scenarios (one row per file, only when there are several), table-scenario-K (one
 *   row per result row: <th scope="row" data-row="ID">; a row not measured has one
 *   <td class="err"> with its error), and bar charts, each an <svg class="plot bars"> (after
 *   an <h3> saying what it shows) with one <g class="bar" data-row="ID"> per measured row
 *   holding a <rect> (none for 0 on a log scale), <g class="bar error" data-row="ID"> for a
 *   row not measured (its error, cut, as text) or <g class="bar missing"> for a measured row
 *   without that figure, and, where the port rate bounds the figure, a <line class="ref"> at
 *   the port rate:
 *   plot-throughput-K (incast, victim: throughput; loss: goodput; linear, Mbit/s),
 *   plot-victim-K (victim: the victim flow; linear, Mbit/s), plot-probe-K (when any row has
 *   a probe: p99 as the bar, p50 as a <line class="p50">; log scale, us). */
#ifndef SOFTRDMA_TOOLS_REPORT_H
#define SOFTRDMA_TOOLS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct json;

/* Writes the HTML page for the result doc (a tree from json_parse, still owned by the caller)
 * to out: a compare result, or a scenario result when "tool" says so (then as
 * report_scenarios_html with one file and no name). Returns 0, or -EINVAL if doc is not a
 * schema 1 compare result (top level not an object, "schema" missing or not 1) or not a valid
 * scenario result (see above), or -EIO if writing to out failed; err (may be NULL) then holds
 * a one-line reason. In a compare result, missing or ill-typed members are shown as missing,
 * never an error. Nothing is written when doc is refused; on a write error out may hold a
 * partial page. */
int report_html(const struct json *doc, FILE *out, char *err, size_t errlen);

/* Whether doc says it is a scenario result ("tool" is "softrdma compare --scenario"); it may
 * still be refused as malformed. */
bool report_is_scenario(const struct json *doc);

/* Writes one HTML page with a section per scenario result docs[0..n) (trees still owned by
 * the caller; n 1..64). names[i] (names may be NULL, and so may an entry) is what to call
 * docs[i] on the page and in err, e.g. its file name; untrusted like the data. Every doc is
 * checked before anything is written. Returns 0, -EINVAL (n out of range, or a doc is not a
 * valid scenario result: err names it and the member) or -EIO (write error). */
int report_scenarios_html(const struct json *const *docs, const char *const *names, size_t n,
			  FILE *out, char *err, size_t errlen);

#endif
