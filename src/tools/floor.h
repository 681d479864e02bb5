/* The floors `softrdma compare` measures RDMA against (floor.c): the same job done with plain
 * UDP and TCP sockets on the same path, and the time to set up a connection through rdma_cm or
 * a TCP handshake. compare runs each as a server process and a client process and reads the
 * client's JSON file.
 *
 * Both entry points take the rest of the command line with the mode word in argv[0], as a
 * subcommand does; getopt state is reset on entry. They install SIGINT / SIGTERM / SIGPIPE
 * handlers for the run and restore the previous ones before returning. Not thread-safe: one
 * run per process at a time. */
#ifndef SOFTRDMA_TOOLS_FLOOR_H
#define SOFTRDMA_TOOLS_FLOOR_H

/* softrdma compare --floor MODE [--server] [-p PORT] [-s BYTES] [-n COUNT] [-D SECONDS]
 *                          [--json FILE] [--timeout SECONDS] [--cdf] [SERVER]
 * argv[0] is "--floor"; MODE is udp-lat, tcp-lat, udp-bw or tcp-bw. Without SERVER (or with
 * --server) the process is the server. Returns the exit status: 0 success, 1 error (the JSON
 * file, if any, then carries "error"), 2 bad usage, 130 / 143 stopped by SIGINT / SIGTERM. */
int floor_main(int argc, char **argv);

/* softrdma compare --setup [--server] [--tcp] [-p PORT] [-n COUNT] [--json FILE]
 *                          [--timeout SECONDS] [SERVER]
 * argv[0] is "--setup". Connection set-up time through rdma_cm (the device is the one of the
 * address; SOFTRDMA_TRANSPORT chooses RoCE or iWARP where both exist) or, with --tcp, of a
 * plain TCP connect(). Same exit statuses as floor_main. */
int setup_main(int argc, char **argv);

#endif
