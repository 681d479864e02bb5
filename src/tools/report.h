/* `softrdma report`: one self-contained HTML5 page (inline CSS and SVG; no script, no external
 * resource, no network) from the JSON result of `softrdma compare`.
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
 *   error points are drawn as <path class="error-point"> markers. */
#ifndef SOFTRDMA_TOOLS_REPORT_H
#define SOFTRDMA_TOOLS_REPORT_H

#include <stddef.h>
#include <stdio.h>

struct json;

/* Writes the HTML page for the compare result doc (a tree from json_parse, still owned by the
 * caller) to out. Returns 0, or -EINVAL if doc is not a schema 1 compare result (top level not
 * an object, "schema" missing or not 1), or -EIO if writing to out failed; err (may be NULL)
 * then holds a one-line reason. Missing or ill-typed members are shown as missing, never an
 * error. On failure out may hold a partial page. */
int report_html(const struct json *doc, FILE *out, char *err, size_t errlen);

#endif
